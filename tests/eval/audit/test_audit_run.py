"""The audit's runner (docs/design.md §8): every check PASSes on the sample world, the report is written with
its verdict, and the CLI's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forecast_env.eval.audit.run import FAIL, INCONCLUSIVE, PASS, run_audit
from tests.support.audit_data import FAST


@pytest.fixture(scope="module")
def audited_micro(micro_events: Path, micro_world: Path):
    return run_audit(micro_events, "eval", settings=FAST, polymarket=micro_world / "polymarket")


def test_audit_passes_on_the_sample_world(audited_micro, tmp_path: Path) -> None:
    rep = audited_micro
    verdicts = {c.name: c.verdict for c in rep.checks}
    assert [c.name for c in rep.checks] == ["schedule", "structure", "retrieval", "text", "replay", "siblings"]
    for name in ("schedule", "retrieval", "text", "replay", "siblings"):
        assert verdicts[name] == PASS, (name, rep.check(name).reason, rep.check(name).examples[:3])
    # micro has a handful of events: the probe cannot tell, and says so
    assert verdicts["structure"] in (PASS, INCONCLUSIVE)
    assert rep.verdict != FAIL
    paths = rep.write(tmp_path / "audit")
    data = json.loads(paths["json"].read_text())
    assert data["verdict"] == rep.verdict and len(data["checks"]) == 6
    assert "inclusion_bias" in data["checks"][1]["figures"]
    assert "Verdict" in paths["md"].read_text()


def test_cli_exit_codes(micro_events: Path, tmp_path: Path, capsys) -> None:
    from forecast_env.cli.main import main

    code = main(["audit", "--workspace", str(micro_events), "--checks", "schedule,replay", "--out",
                 str(tmp_path / "a"), "--no-progress", "--audit-set", "replay_events=1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "audit PASS" in out and (tmp_path / "a" / "audit.md").exists()
    assert main(["audit", "--workspace", str(tmp_path / "nowhere")]) == 2
    assert main(["audit", "--workspace", str(micro_events), "--audit-set", "bogus=1"]) == 2
    assert main(["audit", "--workspace", str(micro_events), "--checks", "nonsense"]) == 2
