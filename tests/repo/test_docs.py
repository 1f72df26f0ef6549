"""The docs stay true to the code: every `docs/design.md §...` cited exists, every `forecast-env`
command shown in the README and docs/ parses with the options it shows, and every file or folder that
docs/ARCHITECTURE.md names exists."""

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


def architecture_paths() -> list[tuple[str, list[Path]]]:
    """Each path in backticks that docs/ARCHITECTURE.md names, with the places it may be relative to."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    out = []
    # the map's table: a row's files are relative to its folder (or to the root or the core)
    table = text.split("## Folders and what each holds")[1].split("\n## ")[0]
    for line in table.splitlines():
        folder = re.match(r"\| `([^`]+)`", line)
        if folder is None:
            continue
        bases = [REPO / folder.group(1), REPO, REPO / "forecast_env"]
        for tok in re.findall(r"`([^`\s]+)`", line)[1:]:
            # a file (name.py, name.yaml, ...) or a folder (name/), not an import name or a WS/ artifact
            if not tok.startswith("WS/") and re.fullmatch(r"[\w./*-]*(?:\.(?:py|yaml|json|md)|/)", tok):
                out.append((tok, bases))
    # the whole page: a path that starts at a code folder
    for tok in re.findall(r"`([^`\s<{]+)`", text):
        if tok.split("/")[0] in (*CODE_DIRS, "docs") and "/" in tok:
            out.append((tok, [REPO]))
    return out


def test_every_path_the_architecture_map_names_exists() -> None:
    paths = architecture_paths()
    assert len(paths) >= 100 and ("merge/keys.py", [REPO / "corpus_build/", REPO, REPO / "forecast_env"]) in paths
    missing = [tok for tok, bases in paths if not any(list(b.glob(tok.rstrip("/"))) for b in bases)]
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"
