"""The docs stay true to the code: every `docs/design.md §...` cited exists, and every `forecast-env`
command shown in the README and docs/ parses with the options it shows."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CODE_DIRS = ("forecast_env", "corpus_build", "envs", "agents", "eval", "adapters", "synth", "benchmarks", "tests",
             "configs")
SECTION = re.compile(r"§[0-9]+(?:\.[A-Za-z0-9_-]+)*")
DOC_PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def design_sections() -> set[str]:
    """The ids of docs/design.md's headings: the first word of a heading that starts with §."""
    ids = set()
    for line in (REPO / "docs" / "design.md").read_text().splitlines():
        m = re.match(r"#{1,4} (§\S+)", line)
        if m:
            ids.add(m.group(1))
    return ids


def citing_files() -> list[Path]:
    files = [p for d in CODE_DIRS for p in (REPO / d).rglob("*") if p.suffix in (".py", ".yaml", ".md")]
    return [p for p in files + DOC_PAGES if "__pycache__" not in p.parts and p.name != "design.md"]


def test_every_cited_design_section_exists() -> None:
    ids = design_sections()
    assert "§2.timestamps" in ids and "§8" in ids  # the parser reads the headings it should
    missing = []
    for path in citing_files():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if "design" not in line and "§" not in line:
                continue
            for ref in SECTION.findall(line):
                if ref not in ids:
                    missing.append(f"{path.relative_to(REPO)}:{n}: {ref}")
    assert not missing, "cited sections that docs/design.md does not have:\n" + "\n".join(missing)


def shown_commands() -> list[tuple[str, list[str]]]:
    """Every `forecast-env ...` command in a shell block of the README and docs/, as argv."""
    out = []
    for page in DOC_PAGES:
        text = page.read_text()
        for block in re.findall(r"```(?:bash|sh|shell|console)\n(.*?)```", text, flags=re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.strip().removeprefix("$ ")
                if not line.startswith("forecast-env "):
                    continue
                line = re.split(r"\s+#\s", line)[0]  # a trailing comment
                line = re.split(r"\s[|&]{1,2}(?:\s|$)|\s;\s|\s&$", line)[0]  # a pipe, a chain, a background job
                line = line.rstrip("&").strip()
                out.append((f"{page.relative_to(REPO)}: {line}", shlex.split(line)[1:]))
    return out


COMMANDS = shown_commands()


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) >= 20, COMMANDS


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_shown_command_parses(where: str, argv: list[str]) -> None:
    from forecast_env.cli.main import build_parser

    parser = build_parser()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{where}\n  does not parse (exit {exc.code}): {err.getvalue().strip()}")
    assert getattr(args, "func", None) is not None, f"{where}: not a command"
