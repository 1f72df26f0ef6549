"""The import graph, read by grimp over the package as installed (the seven folders under one namespace):
no cycle between modules, and the layering of CONVENTIONS.md (the core imports none of the others,
synth only the core, nothing but the adapters and the CLI imports eval)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp")

REPO = Path(__file__).resolve().parents[2]

GRAPH_SCRIPT = """
import json, sys
import grimp
g = grimp.build_graph("forecast_env", include_external_packages=False, cache_dir=None)
print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))
"""


@pytest.fixture(scope="module")
def graph() -> dict[str, list[str]]:
    """module -> the modules it imports (lazy imports inside functions included), read from the repository
    root: the code folders are subpackages of forecast_env through its symbolic links."""
    out = subprocess.run([sys.executable, "-c", GRAPH_SCRIPT], cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": ""},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


SUBPACKAGES = ("corpus_build", "envs", "agents", "eval", "adapters", "synth", "cli")


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SUBPACKAGES else "core"


def test_the_graph_covers_every_folder(graph: dict[str, list[str]]) -> None:
    layers = {_layer(m) for m in graph}
    assert layers == {"core", *SUBPACKAGES}, layers
    assert "forecast_env.eval.runs.runner" in graph and "forecast_env.synth.generate" in graph


def test_no_import_cycle(graph: dict[str, list[str]]) -> None:
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]


def test_layering(graph: dict[str, list[str]]) -> None:
    allowed = {
        "core": {"core"},
        "synth": {"core", "synth"},
        "corpus_build": {"core", "corpus_build"},
        "envs": {"core", "envs"},
        "agents": {"core", "agents", "envs"},
        "eval": {"core", "corpus_build", "envs", "agents", "eval"},
        "adapters": {"core", "corpus_build", "envs", "agents", "eval", "adapters"},
        "cli": set(SUBPACKAGES) | {"core"},
    }
    wrong = sorted(f"{m} -> {i}" for m, imports in graph.items() for i in imports
                   if _layer(i) not in allowed[_layer(m)])
    assert wrong == []
