"""A release of a split that holds questions generated from the news (event ids `g-...`) freezes where they came
from: the sha256 of WS/questions/accepted.jsonl and of the model recording, the models and prompt hashes, the
generated event ids and the questions config hash; a workspace whose question files differ is refused."""

from __future__ import annotations

import json
import shutil
from datetime import date, timedelta
from pathlib import Path

import pytest

from forecast_env.envs.events.build import import_questions, load_events
from forecast_env.errors import RunError
from forecast_env.eval.runs.release import (
    QUESTION_PATHS,
    load_release,
    questions_config_hash,
    questions_differences,
    score_run,
    verify_workspace,
    write_release,
)
from forecast_env.questions.store import QuestionFiles
from forecast_env.store import sha256_file

CONFIG = {"llm": {"model": "scripted"}, "seeds": {"per_date": 2}}
GENERATE = {"model": "scripted", "prompts": {"propose": "aa11", "verify_quality": "bb22"}, "usage": {"total_tokens": 9}}
RESOLVE = {"model": "scripted-resolver", "prompts": {"resolve": "cc33", "resolve_final": "dd44"},
           "usage": {"total_tokens": 7}}


def _question(qid: str, opened: date, noun: str) -> dict:
    """An accepted question in the own-questions format, as questions/resolve.py writes it."""
    return {"id": qid, "question": f"Will the Zorvath council approve the {noun} canal?", "options": ["Yes", "No"],
            "open_date": opened.isoformat(), "close_date": (opened + timedelta(days=24)).isoformat(),
            "resolved_option": "No", "description": "Resolution criteria: the council's published vote.",
            "category": "politics", "known_date": None,
            "provenance": {"route": "prospective", "seed_ids": [], "model": "scripted", "votes": []}}


@pytest.fixture(scope="module")
def generated(micro_events: Path, micro_truth: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The micro workspace with two generated questions of the eval split imported as events, the question files
    beside them, and its eval release."""
    ws = tmp_path_factory.mktemp("release_questions") / "ws"
    shutil.copytree(micro_events, ws, ignore=shutil.ignore_patterns("runs"))
    files = QuestionFiles.of(ws)
    files.root.mkdir()
    start = date.fromisoformat(micro_truth["splits"]["eval"][0])
    lines = [_question("p20990101-aaaa-0", start + timedelta(days=3), "Quillon"),
             _question("r20990101-bbbb-0", start + timedelta(days=5), "Brastow")]
    files.accepted.write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines))
    files.recording.write_text(json.dumps({"key": "k1", "purpose": "propose", "request": {}, "message": {}}) + "\n")
    files.generate_info.write_text(json.dumps(GENERATE))
    files.resolve_info.write_text(json.dumps(RESOLVE))
    # no screen: the offline judge rates made-up questions that no article covers `partial` (excluded)
    summary = import_questions(files.accepted, ws, config={"screen": {"enabled": False}}, progress=False,
                               source="generated")
    assert summary["kept"] == 2, summary
    out = ws.parent / "release"
    write_release(ws, "eval", out, questions_config=CONFIG)
    return {"ws": ws, "files": files, "release": out, "ids": ["g-p20990101-aaaa-0", "g-r20990101-bbbb-0"]}


def test_the_release_freezes_the_generated_questions(generated: dict) -> None:
    ws, files = generated["ws"], generated["files"]
    rel = load_release(generated["release"])  # its own hashes check
    block = rel.data["questions"]
    assert block == {
        "event_ids": generated["ids"],
        "accepted_sha256": sha256_file(files.accepted),
        "recording_sha256": sha256_file(files.recording),
        "models": {"generate": "scripted", "resolve": "scripted-resolver"},
        "prompts": {"propose": "aa11", "resolve": "cc33", "resolve_final": "dd44", "verify_quality": "bb22"},
        "config_hash": questions_config_hash(CONFIG),
    }
    assert set(generated["ids"]) <= set(rel.event_ids)
    split = load_events(ws).events.filter(load_events(ws).events["split"] == "eval")["event_id"].to_list()
    assert sorted(e for e in split if e.startswith("g-")) == generated["ids"]
    # written again, the same bytes; the config hash leaves out where the model is served
    again = write_release(ws, "eval", ws.parent / "again", questions_config=CONFIG)
    assert json.loads(again.read_text()) == rel.data
    served = {"llm": {"model": "scripted", "base_url": "http://elsewhere:1/v1", "max_retries": 9},
              "seeds": {"per_date": 2}, "replay": "only"}
    assert questions_config_hash(served) == block["config_hash"] != questions_config_hash({**CONFIG, "seeds": {}})
    # the release's own hash covers the block
    edited = dict(rel.data)
    edited["questions"] = {**block, "recording_sha256": "0" * 64}
    copy = ws.parent / "edited"
    copy.mkdir()
    (copy / "release.json").write_text(json.dumps(edited))
    with pytest.raises(RunError, match="edited"):
        load_release(copy)


def test_the_release_reads_the_files_the_questions_store_names(tmp_path: Path) -> None:
    """`eval` may not import the questions layer, so the release names the files itself: the same ones."""
    files = QuestionFiles.of(tmp_path)
    assert {name: str(getattr(files, name).relative_to(tmp_path)) for name in QUESTION_PATHS} == QUESTION_PATHS


def test_a_split_without_generated_events_writes_no_block(generated: dict) -> None:
    path = write_release(generated["ws"], "train", generated["ws"].parent / "train", questions_config=CONFIG)
    assert "questions" not in json.loads(path.read_text())
    assert questions_differences(load_release(path), generated["ws"] / "nowhere") == []


def test_a_workspace_with_other_question_files_is_refused(generated: dict, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(generated["ws"], ws)
    rel = load_release(generated["release"])
    verify_workspace(rel, ws)  # the same files: accepted
    accepted = QuestionFiles.of(ws).accepted
    rows = [json.loads(x) for x in accepted.read_text().splitlines()]
    rows[0]["resolved_option"] = "Yes"  # a flipped answer
    accepted.write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in rows))
    with pytest.raises(RunError, match=r"accepted\.jsonl has sha256 [0-9a-f]{16}\.\.\., the release "
                                       r"[0-9a-f]{16}\.\.\. \(the accepted questions are not those the release froze\)"):
        verify_workspace(generated["release"], ws)
    QuestionFiles.of(ws).recording.unlink()
    diff = questions_differences(rel, ws)
    assert len(diff) == 2 and "recording.jsonl is missing (the model's recorded requests and answers" in diff[1]


def test_generated_events_the_accepted_file_does_not_hold_are_not_released(generated: dict, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(generated["ws"], ws)
    accepted = QuestionFiles.of(ws).accepted
    accepted.write_text(accepted.read_text().splitlines()[0] + "\n")  # an accepted file newer than the events
    with pytest.raises(RunError, match="holds 1 generated events that .*accepted.jsonl does not accept "
                                       r"\(g-r20990101-bbbb-0\)"):
        write_release(ws, "eval", tmp_path / "rel")
    QuestionFiles.of(ws).generate_info.unlink()
    with pytest.raises(RunError, match="lacks questions/generate.json"):
        write_release(ws, "eval", tmp_path / "rel")


@pytest.mark.slow
def test_score_refuses_a_run_whose_workspace_has_other_questions(generated: dict, tmp_path: Path) -> None:
    from forecast_env.eval.runs.runner import run_benchmark

    ws = tmp_path / "ws"
    shutil.copytree(generated["ws"], ws)
    run = run_benchmark(ws, ["uniform"], split="eval", workers=1, progress=False, run_id="generated-ok")
    assert json.loads(Path(score_run(generated["release"], run)["release_check"]).read_text())["run_id"] == "generated-ok"
    with QuestionFiles.of(ws).recording.open("a") as fh:
        fh.write(json.dumps({"key": "k2", "purpose": "resolve", "request": {}, "message": {}}) + "\n")
    with pytest.raises(RunError, match=r"was not made against release .*recording\.jsonl has sha256"):
        score_run(generated["release"], run)
