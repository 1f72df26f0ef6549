"""The `siblings` sample world (cross-question exposure plants) built with the rule on and off, for
tests/envs/events/test_exposure.py and tests/eval/audit/test_audit_siblings.py."""

from __future__ import annotations

import json
from pathlib import Path


#: The events config of these builds: market side only (no corpus needed), the rule on or off.
def events_config(cross_question: bool) -> dict:
    return {"screen": {"enabled": False}, "schedule": {"require_index": False, "cross_question": cross_question}}


def build_siblings(root: Path, preset: str = "siblings") -> dict[str, Path]:
    """Synthesize `preset` under `root` and build its events twice: {"world", "on", "off"} paths."""
    from forecast_env.envs.events.build import build_events
    from forecast_env.synth import synthesize

    world = root / preset
    synthesize(world, preset=preset, seed=0, progress=False)
    out = {"world": world}
    for name, flag in (("on", True), ("off", False)):
        ws = root / f"ws-{preset}-{name}"
        build_events(world / "polymarket", ws, config=events_config(flag), progress=False)
        out[name] = ws
    return out


def truth_exposures(world: Path) -> list[dict]:
    return json.loads((world / "truth.json").read_text())["exposures"]
