"""The import graph, read by grimp from the repository root (the code folders are subpackages of forecast_env
through its symbolic links): no cycle between modules, and the layers of docs/ARCHITECTURE.md ("The import
rules"): the core imports no stage; synth only the core; the events build no runtime module of envs; eval no
adapters, recipe or CLI; nothing but the adapters, the recipe package and the CLI imports eval; the report
does not import the audit, and the audit imports of the report only its bootstrap."""

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


#: The layers below the core, each a module prefix; a module is in the layer of its longest matching prefix,
#: and in the core when none matches (forecast_env itself, its modules and CORE_SUBPACKAGES).
LAYERS = {
    "corpus_build": "forecast_env.corpus_build",
    "envs.events": "forecast_env.envs.events",  # the events build
    "envs": "forecast_env.envs",  # the runtime environments
    "agents": "forecast_env.agents",
    "eval": "forecast_env.eval",
    "synth": "forecast_env.synth",
    "questions": "forecast_env.questions",  # questions generated from the news (docs/questions.md)
    "recipe": "forecast_env.recipe",
    "adapters": "forecast_env.adapters",
    "cli": "forecast_env.cli",
}
#: the subpackages of forecast_env that belong to the core
CORE_SUBPACKAGES = ("retrieval", "workspace", "defaults")

STAGES = {"corpus_build", "envs.events", "envs", "agents", "eval"}
#: what each layer may import (docs/ARCHITECTURE.md, "The import rules")
ALLOWED = {
    "core": {"core"},
    "synth": {"core", "synth"},
    "corpus_build": {"core", "corpus_build"},
    "envs.events": {"core", "envs.events"},
    "envs": {"core", "envs.events", "envs"},
    "agents": {"core", "envs", "agents"},
    "eval": {"core", *STAGES},
    # the question generator vets with the audit's check-4 detector and the events build's exposure rule, and
    # its research agent uses the environment's tools; it adds events to the events build
    "questions": {"core", "envs.events", "envs", "eval", "questions"},
    "recipe": {"core", *STAGES, "questions", "recipe"},
    "adapters": {"core", *STAGES, "adapters"},
    "cli": {"core", *LAYERS},
}


def _layer(module: str) -> str:
    best = max((p for p in LAYERS.values() if module == p or module.startswith(p + ".")), key=len, default=None)
    return "core" if best is None else next(name for name, p in LAYERS.items() if p == best)


def test_the_graph_covers_every_folder(graph: dict[str, list[str]]) -> None:
    for module in ("forecast_env.eval.runs.runner", "forecast_env.eval.audit.run", "forecast_env.eval.report.render",
                   "forecast_env.envs.events.build", "forecast_env.envs.world_env", "forecast_env.synth.generate",
                   "forecast_env.corpus_build.pipeline", "forecast_env.agents.base", "forecast_env.adapters.mcp",
                   "forecast_env.cli.main", "forecast_env.retrieval.searcher"):
        assert module in graph, module
    # a new subpackage of forecast_env is a layer or part of the core, never the core by accident
    subpackages = {m.split(".")[1] for m in graph if m.count(".") >= 2}
    unplaced = sorted(s for s in subpackages if s not in CORE_SUBPACKAGES and _layer(f"forecast_env.{s}") == "core")
    assert unplaced == [], f"add them to LAYERS or CORE_SUBPACKAGES (and to docs/ARCHITECTURE.md): {unplaced}"
    assert _layer("forecast_env.envs.events.polymarket.client") == "envs.events"
    assert _layer("forecast_env.envs.tools") == "envs" and _layer("forecast_env.store") == "core"


def test_no_import_cycle(graph: dict[str, list[str]]) -> None:
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]


def test_the_rules_as_written() -> None:
    """The table says what docs/ARCHITECTURE.md says."""
    assert all(ALLOWED[layer] == {"core", layer} for layer in ("synth", "corpus_build", "envs.events"))
    assert ALLOWED["core"] == {"core"} and "envs" not in ALLOWED["envs.events"]
    assert {layer for layer, allowed in ALLOWED.items() if "eval" in allowed} == {"eval", "questions", "recipe", "adapters",
                                                                                 "cli"}
    assert not {"adapters", "recipe", "cli", "synth", "questions"} & ALLOWED["eval"]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layering(graph: dict[str, list[str]], layer: str) -> None:
    wrong = sorted(f"{m} -> {i}" for m, imports in graph.items() if _layer(m) == layer for i in imports
                   if _layer(i) not in ALLOWED[layer])
    assert wrong == []


def test_the_report_does_not_import_the_audit(graph: dict[str, list[str]]) -> None:
    """Within eval: the report never imports the audit; the audit imports of the report its bootstrap only
    (checks 2 and 6 put intervals on their probes with it)."""
    audit, report = "forecast_env.eval.audit", "forecast_env.eval.report"
    inside = {m: [i for i in imports if i.startswith("forecast_env.eval.")] for m, imports in graph.items()}
    assert sorted(f"{m} -> {i}" for m, imports in inside.items() if m.startswith(report + ".")
                  for i in imports if i.startswith(audit + ".") or i == audit) == []
    assert {i for m, imports in inside.items() if m.startswith(audit + ".")
            for i in imports if i.startswith(report + ".")} <= {report + ".bootstrap"}
