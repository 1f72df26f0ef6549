"""The measured-rates data file (forecast_env/rates.json): read, and rewritten by `write_rate`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forecast_env.rates import RATES_FILE, Rate, machine_state, rates_with_prefix, read_rates, write_rate


@pytest.fixture
def rates_copy(tmp_path: Path) -> Path:
    """A copy of the shipped data file, for writing."""
    path = tmp_path / "rates.json"
    shutil.copyfile(RATES_FILE, path)
    return path


def test_write_rate_updates_one_rate_and_keeps_the_rest(rates_copy: Path) -> None:
    before = read_rates(rates_copy)
    rate = write_rate("embed", 40.5, "taskset -c 1 .venv/bin/python -m benchmarks.retrieval.embedding_backends --n 9",
                      state="idle", date="2027-01-02", path=rates_copy)
    after = read_rates(rates_copy)
    assert after["embed"] == rate and list(after) == list(before)
    assert (rate.value, rate.date, rate.state, rate.note) == (40.5, "2027-01-02", "idle", "")
    assert (rate.unit, rate.measured_on, rate.section) == (before["embed"].unit, before["embed"].measured_on,
                                                           before["embed"].section)
    assert rate.script_path() == "benchmarks/retrieval/embedding_backends.py"
    assert {k: v for k, v in after.items() if k != "embed"} == {k: v for k, v in before.items() if k != "embed"}
    assert rates_copy.read_text().endswith("}\n") and "about" in json.loads(rates_copy.read_text())


def test_write_rate_refuses_what_a_reader_could_not_use(rates_copy: Path) -> None:
    text = rates_copy.read_text()
    with pytest.raises(ValueError, match="state"):
        write_rate("embed", 40.0, "python benchmarks/x.py", state="busy", path=rates_copy)
    with pytest.raises(ValueError, match="positive"):
        write_rate("embed", 0, "python benchmarks/x.py", state="idle", path=rates_copy)
    with pytest.raises(ValueError, match="unit"):
        write_rate("new.rate", 1.0, "python benchmarks/x.py", state="idle", path=rates_copy)
    with pytest.raises(ValueError, match="no script"):
        write_rate("embed", 1.0, "make bench", state="idle", path=rates_copy)
    assert rates_copy.read_text() == text  # nothing written
    new = write_rate("new.rate", 2.0, "python benchmarks/x.py --fast", state="loaded", unit="things/s",
                     measured_on="synthetic things", section="X", path=rates_copy)
    assert read_rates(rates_copy)["new.rate"] == new and new.script() == "x.py"


def test_a_rate_names_its_script_in_either_command_form() -> None:
    def rate(command: str) -> Rate:
        return Rate(1.0, "u", "m", command, "2026-12-04", "idle")

    assert rate("cd DATA && .venv/bin/python -m benchmarks.corpus.merge all --n 3").script() == "corpus/merge.py"
    assert rate(".venv/bin/python benchmarks/bench_merge.py all").script_path() == "benchmarks/bench_merge.py"


def test_rates_with_prefix_keeps_the_file_order() -> None:
    cpu = rates_with_prefix("merge.cpu.")
    assert list(cpu) == ["keys", "pairs", "store"] and all(v > 0 for v in cpu.values())


def test_write_rate_changes_only_the_lines_of_the_new_measurement(rates_copy: Path) -> None:
    """The file keeps its rates' order, each rate's field order (extract.lean's value is not its first field)
    and its formatting, so a re-recorded rate's diff is its own changed lines."""
    before = rates_copy.read_text().splitlines()
    rate = write_rate("extract.lean", 44.2, ".venv/bin/python -m benchmarks.corpus.warc_stage_speed --variants body=lean",
                      state="loaded", date="2027-01-02", note="a new run", path=rates_copy)
    after = rates_copy.read_text().splitlines()
    assert len(after) == len(before) and rates_copy.read_text().endswith("}\n")
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    fields = [b.split(":")[0].strip().strip('"') for _, b in changed]
    assert fields == ["command", "value", "date", "state", "note"]  # the order extract.lean's fields have in the file
    assert all(a.split(":")[0] == b.split(":")[0] for a, b in changed)  # each line in its place, same indent
    assert read_rates(rates_copy)["extract.lean"] == rate and rate.unit == "records/s/core"
    text = rates_copy.read_text()
    assert json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n" == text
    # an integer value stays an integer (merge.base_bytes is bytes)
    write_rate("merge.base_bytes", 150994944, ".venv/bin/python -m benchmarks.corpus.merge pairs --keys k",
               state="idle", path=rates_copy)
    assert '"value": 150994944,' in rates_copy.read_text()


def test_the_shipped_file_is_in_write_rates_format() -> None:
    """A first `--record` must not reformat the file: it is already as write_rate writes it."""
    text = RATES_FILE.read_text()
    assert json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n" == text


def test_machine_state_is_idle_under_half_a_load_per_cpu() -> None:
    assert machine_state(0.9, 2) == "idle" and machine_state(1.0, 2) == "loaded"
    assert machine_state(3.7, 2) == "loaded" and machine_state(7.9, 16) == "idle"
    assert machine_state() in ("idle", "loaded")  # the machine's own load average
