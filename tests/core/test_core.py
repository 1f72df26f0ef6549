"""Core: configuration loading/validation, workspace store (atomic writes, manifests, verify), CLI shell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from forecast_env import schema
from forecast_env.cli.main import main
from forecast_env.config import SECTIONS, config_hash, default_config, load_config
from forecast_env.errors import ConfigError, WorkspaceError
from forecast_env.store import (
    Workspace,
    atomic_path,
    atomic_write_table,
    read_table,
    verify_manifest,
    verify_workspace,
    write_manifest,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("section", SECTIONS)
def test_the_packaged_defaults_are_the_repo_configs(section: str) -> None:
    """configs/*.yaml is the one source: the package reads it through the link forecast_env/defaults."""
    assert (REPO / "forecast_env" / "defaults").resolve() == (REPO / "configs").resolve()
    assert default_config(section) == yaml.safe_load((REPO / "configs" / f"{section}.yaml").read_text())
    assert load_config(section) == default_config(section)


def test_overrides_and_files(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("language:\n  min_english_score: 0.8\n")
    cfg = load_config("corpus", [f], ["quality.c4.min_sentences=3", "dedup.bands=4"])
    assert cfg["language"]["min_english_score"] == 0.8
    assert cfg["quality"]["c4"]["min_sentences"] == 3 and cfg["dedup"]["bands"] == 4
    # a file with several sections by name
    g = tmp_path / "all.yaml"
    g.write_text("corpus:\n  corpus_start: '2024-01-01'\nenv:\n  memory: false\n")
    assert load_config("corpus", [g])["corpus_start"] == "2024-01-01"
    assert load_config("env", [g])["memory"] is False
    # ints are accepted where a float is expected, and become floats
    assert load_config("corpus", overrides=["language.min_english_score=1"])["language"]["min_english_score"] == 1.0
    assert config_hash(cfg) != config_hash(load_config("corpus"))


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("language.min_englsh_score=0.7", "unknown key"),
        ("language.min_english_score=high", "must be float"),
        ("dedup.bands=2.5", "must be int"),
        ("embed.backend=tensorrt", "not allowed"),
        ("quality=3", "must be a mapping"),
        ("nokeyvalue", "expected key=value"),
    ],
)
def test_bad_values_name_the_key(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config("corpus", overrides=[override])
    assert fragment in str(exc.value)
    if "=" in override:
        assert override.split("=")[0].split(".")[0] in str(exc.value)


def test_bad_file_named(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("dedup: {rows: 'sixteen'}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*dedup\.rows"):
        load_config("corpus", [f])
    f.write_text("a: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config("corpus", [f])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("corpus", [tmp_path / "nope.yaml"])


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "x" / "out.bin"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"partial")
        raise RuntimeError("crash mid-write")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_table_roundtrip_conforms_to_schema(tmp_path: Path) -> None:
    t = pa.table({"event_id": ["e1"], "stage": ["span"], "reason": ["too_short"]})
    path = atomic_write_table(tmp_path / "excluded.parquet", t, schema.EXCLUDED)
    back = read_table(path, schema.EXCLUDED)
    assert back.schema == schema.EXCLUDED and back["detail"].null_count == 1


def test_manifest_verify_detects_changes(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path / "ws", create=True)
    atomic_write_table(ws.events_table("excluded"), pa.table({"event_id": ["a", "b"]}), schema.EXCLUDED)
    m = write_manifest(ws.events_dir, "events", config={"x": 1})
    assert m["rows"] == 2 and m["config_hash"] == config_hash({"x": 1}) and "pyarrow" in m["versions"]
    assert verify_manifest(ws.events_dir) == []
    assert verify_workspace(ws.root) == {"events": []}
    with open(ws.events_table("excluded"), "ab") as fh:
        fh.write(b"tamper")
    assert verify_manifest(ws.events_dir)
    assert main(["verify", str(ws.root)]) == 2


def test_unknown_events_table_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="unknown events table"):
        Workspace.at(tmp_path).events_table("nope")


def test_cli_user_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "forecast_env.cli.main", "verify", str(tmp_path / "missing")],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
    dbg = subprocess.run(
        [sys.executable, "-m", "forecast_env.cli.main", "--debug", "verify", str(tmp_path / "missing")],
        capture_output=True, text=True,
    )
    assert dbg.returncode == 2 and "Traceback" in dbg.stderr


def test_cli_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "verify" in out


def test_reason_codes_are_unique_per_stage() -> None:
    for table in (schema.CORPUS_REASONS, schema.EVENT_REASONS):
        for codes in table.values():
            assert len(codes) == len(set(codes))
    assert set(schema.CORPUS_REASONS) == set(schema.CORPUS_STAGES)
    assert set(schema.EVENT_REASONS) == set(schema.EVENT_STAGES)
    json.dumps(schema.CORPUS_REASONS)
