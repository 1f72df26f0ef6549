"""A real model's answers, replayed: Gemma 3 270M's recorded responses (benchmarks/questions/local_model.py) served
by a local OpenAI-compatible server the test starts, over the same `questions` sample world. Every request the
pipeline sends must be one the model answered (the server refuses any other), and the outcome is the golden
file's (tests/golden/questions_gemma.json; UPDATE_GOLDEN=1 rewrites it after a new recording)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from benchmarks.questions.local_model import RECORDINGS, run_config
from forecast_env.questions import generate_questions, questions_report, resolve_questions
from forecast_env.questions.model import request_key
from forecast_env.questions.store import QuestionFiles
from tests.support.chat_server import Status

MODEL = "gemma-3-270m-q4_k_m.gguf"
RECORDING = RECORDINGS / f"{MODEL}.jsonl"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "questions_gemma.json"
DATES = "2025-07-01..2026-05-24"  # the benchmark's defaults: one seed per route every 14 days


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_recorded_real_model_replays_through_a_local_server(questions_world: Path, tmp_path: Path) -> None:
    from tests.support.chat_server import ChatServer

    recorded = {}
    for line in RECORDING.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        recorded[rec["key"]] = rec
    unknown: list[str] = []

    def answer(body: dict) -> dict | Status:
        rec = recorded.get(request_key(body))
        if rec is None:
            unknown.append(json.dumps(body)[:300])
            return Status(400, {"error": {"message": "this request is not in the recording"}})
        return {"id": "rec", "object": "chat.completion", "model": MODEL,
                "choices": [{"index": 0, "message": rec["message"], "finish_reason": "stop"}],
                "usage": {"prompt_tokens": rec["prompt_tokens"], "completion_tokens": rec["completion_tokens"]}}

    ws = tmp_path / "ws"
    shutil.copytree(questions_world / "ws", ws)
    with ChatServer(default=answer) as srv:
        cfg = run_config(MODEL, srv.base_url, per_date=1, every=14)  # replay auto: a repeated request is answered once
        cfg["llm"] = {**cfg["llm"], "max_retries": 0}
        generate_questions(ws, DATES, cfg, progress=False)
        resolve_questions(ws, cfg, progress=False)
        n = len(srv.requests)
    assert unknown == [], f"{len(unknown)} requests the model never answered, e.g. {unknown[0]}"
    files = QuestionFiles.of(ws)
    rep = questions_report(ws)
    got = {"model": MODEL, "requests": n, "seeds": rep["seeds"], "drafts": rep["drafts"], "accepted": rep["accepted"],
           "funnel": rep["funnel"], "drafts_sha256": _sha(files.drafts), "questions_sha256": _sha(files.resolved),
           "accepted_sha256": _sha(files.accepted)}
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(GOLDEN.read_text())
    assert n == len(recorded)  # every recorded answer is used: the recording is this run's, nothing stale
