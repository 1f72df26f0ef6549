"""Audit check 5 `replay` (docs/design.md §8): FAIL on a nondeterministic agent; the third run on another
thread count and SIMD level PASSes on identical logs and FAILs when they differ."""

from __future__ import annotations

import random
from pathlib import Path

from forecast_env.eval.audit.run import FAIL, PASS, run_audit
from tests.support.audit_data import FAST


class _CoinAgent:
    """Forecasts from an unseeded random source: its episodes differ from run to run."""

    name = "coin"

    def __init__(self) -> None:
        self._rng = random.SystemRandom()

    def reset(self, *, seed: int | None = None) -> None:
        return None

    def act(self, observation: str, info: dict) -> dict:
        opts = list(info.get("options") or [])
        w = [self._rng.random() + 0.01 for _ in opts]
        return {"tool": "forecast", "args": {"probabilities": {o: x / sum(w) for o, x in zip(opts, w)}}}


def test_replay_check_fails_on_a_nondeterministic_agent(micro_events: Path) -> None:
    res = run_audit(micro_events, "eval", checks=["replay"], settings=FAST,
                    agent_factory=lambda i: _CoinAgent()).check("replay")
    assert res.verdict == FAIL
    assert res.examples and "/forecasts" in res.examples[0]["first_difference"]


def test_replay_check_replays_on_another_thread_count_and_simd_level(micro_events: Path, monkeypatch) -> None:
    """Check 5's third run is a child process under another OMP thread count and FAISS SIMD level; it
    PASSes on identical logs and FAILs, naming that machine, when the child's logs differ."""
    import faiss

    from forecast_env.eval.audit import replay as audit_replay

    res = run_audit(micro_events, "eval", checks=["replay"], settings=FAST).check("replay")
    assert res.verdict == PASS, res.reason
    env = res.figures["other_machine"]
    assert env["FAISS_SIMD_LEVEL"] != faiss.SIMDConfig.get_level_name()
    assert int(env["OMP_NUM_THREADS"]) != faiss.omp_get_max_threads()
    real = audit_replay.replay_elsewhere

    def perturbed(*a, **kw):
        logs = real(*a, **kw)
        logs[-1]["forecasts"][0]["probabilities"] = {"tampered": 1.0}
        return logs

    monkeypatch.setattr(audit_replay, "replay_elsewhere", perturbed)
    res = run_audit(micro_events, "eval", checks=["replay"], settings=FAST).check("replay")
    assert res.verdict == FAIL and "under {'OMP_NUM_THREADS'" in res.examples[0]["first_difference"]
