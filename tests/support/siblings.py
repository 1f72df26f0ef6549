"""The `siblings` sample world (cross-question exposure plants) built with the rule on and off, for
tests/envs/events/test_exposure.py and tests/eval/audit/test_audit_siblings.py."""

from __future__ import annotations

import json
from pathlib import Path


#: The events config of these builds: market side only (no corpus needed), the rule on or off.
def events_config(cross_question: bool) -> dict:
    return {"screen": {"enabled": False}, "schedule": {"require_index": False, "cross_question": cross_question}}


def siblings_paths(root: Path, preset: str = "siblings") -> dict[str, Path]:
    """Where build_siblings(root, preset) writes: {"world", "on", "off"} paths."""
    return {"world": root / preset, "on": root / f"ws-{preset}-on", "off": root / f"ws-{preset}-off"}


def build_siblings(root: Path, preset: str = "siblings") -> dict[str, Path]:
    """Synthesize `preset` under `root` and build its events twice: {"world", "on", "off"} paths."""
    from forecast_env.envs.events.build import build_events
    from forecast_env.synth import synthesize

    out = siblings_paths(root, preset)
    synthesize(out["world"], preset=preset, seed=0, progress=False)
    for name, flag in (("on", True), ("off", False)):
        build_events(out["world"] / "polymarket", out[name], config=events_config(flag), progress=False)
    return out


def truth_exposures(world: Path) -> list[dict]:
    return json.loads((world / "truth.json").read_text())["exposures"]
