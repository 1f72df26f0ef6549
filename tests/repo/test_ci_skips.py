"""In CI (FORECAST_ENV_CI=1) a skipped test fails the run unless it is an expected skip (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
TESTS = """
import shutil
import pytest

def test_needs_a_missing_tool():
    if shutil.which("no-such-tool-here") is None:
        pytest.skip("no-such-tool-here is not installed")

@pytest.mark.llm_local
def test_needs_a_model_server():
    pytest.skip("no local model server")

def test_plain():
    assert True
"""


@pytest.mark.parametrize("ci", [False, True])
def test_a_skip_for_a_missing_tool_fails_only_in_ci(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                    ci: bool) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    llm_local: needs a local model server\n")
    pytester.makepyfile(test_guard=TESTS)
    if ci:
        monkeypatch.setenv("FORECAST_ENV_CI", "1")
    else:
        monkeypatch.delenv("FORECAST_ENV_CI", raising=False)
    result = pytester.runpytest("-p", "no:cacheprovider")
    if ci:
        result.assert_outcomes(passed=1, failed=1, skipped=1)
        result.stdout.fnmatch_lines(["*skipped in CI, where every test must run: no-such-tool-here is not installed*"])
    else:
        result.assert_outcomes(passed=1, skipped=2)
