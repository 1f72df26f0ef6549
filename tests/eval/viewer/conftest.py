"""The viewer tests' runs: the micro workspace with a planted question whose text, options and description carry
HTML and script breakers, an episode run (uniform, retrieval) and a short world run over its eval split, made once per
session; a test module copies the workspace before it writes (the viewer's index) into it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

#: text that would break out of a <script> element or an HTML comment if written raw
EVIL = "</script><script>alert(1)</script> <!-- <img src=x onerror=alert(1)> & \u2028 end"
PLANTED = "q-evil"
PLANTED_QUESTION = {
    "id": "evil", "question": "Will </script><script>alert(1)</script> pass? <!--",
    "options": ["<img src=x onerror=alert(1)>", "No </script>"],
    "open_date": "2026-04-01", "close_date": "2026-04-25", "resolved_option": "No </script>",
    "description": "About " + EVIL, "category": "politics",
    "daily_probabilities": {f"2026-04-{d:02d}": {"<img src=x onerror=alert(1)>": 0.3 + d / 100} for d in range(1, 25)},
}
EPISODE_RUN = "ep"
WORLD_RUN = "world"


@pytest.fixture(scope="session")
def viewer_base(micro_events: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the micro workspace with the planted question and runs `ep` and `world` (read only)."""
    from forecast_env.envs.events.build import import_questions
    from forecast_env.eval.runs.runner import run_benchmark

    ws = tmp_path_factory.mktemp("viewer") / "ws"
    shutil.copytree(micro_events, ws)
    (ws / "planted.jsonl").write_text(json.dumps(PLANTED_QUESTION) + "\n")
    import_questions(ws / "planted.jsonl", ws, config={"screen": {"enabled": False}}, progress=False)
    run_benchmark(ws, ["uniform", "retrieval"], split="eval", workers=1, progress=False, run_id=EPISODE_RUN)
    run_benchmark(ws, ["uniform", "retrieval"], split="eval", workers=1, progress=False, run_id=WORLD_RUN,
                  mode="world", world_end="2026-04-15")
    return ws


def copy_workspace(base: Path, dest: Path) -> Path:
    """A writable copy of the viewer workspace (its runs keep naming the base as their workspace: read only)."""
    shutil.copytree(base, dest)
    return dest
