"""Corpus-side screen: query decomposition, the offline judge, the LLM judge over a real local
HTTP server, and what a judge is allowed to see."""

from __future__ import annotations

import json
import threading
from datetime import date
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from forecast_env.envs.events.screen import (
    EVENT_VIEW_KEYS,
    FORBIDDEN_QUERY_WORDS,
    ChatClient,
    LLMDecomposer,
    LLMJudge,
    OfflineJudge,
    decompose_offline,
    make_event_view,
    parse_json_object,
    screen_event,
)
from forecast_env.errors import EndpointError

VIEW = make_event_view("Who will win the 2026 Veltria presidential election?",
                       "Resolves to the candidate certified by the Veltria electoral commission.",
                       ["Anna Kovac", "Petr Lind", "Mira Sol"], date(2026, 4, 10))


def _doc(i, text, day="2026-04-01"):
    return {"doc_id": f"d{i}", "day": day, "title": "", "summary": "", "text": text, "score": 0.5}


def test_decomposition_counts_and_no_outcome_words():
    dec = decompose_offline(VIEW)
    assert 4 <= len(dec.predictive) <= 7 and 4 <= len(dec.background) <= 7
    for q in dec.queries:
        assert not (set(q.lower().split()) & FORBIDDEN_QUERY_WORDS), q
    assert any("Anna Kovac" in q for q in dec.predictive)
    tiny = decompose_offline(make_event_view("Rain?", "", ["Yes", "No"], date(2026, 1, 1)))
    assert len(tiny.predictive) >= 4 and len(tiny.background) >= 4


def test_offline_judge_verdicts():
    j = OfflineJudge(min_relevant_docs=3, min_option_coverage=0.5)
    docs = [_doc(i, f"Polls in the Veltria presidential race show {name} gaining.")
            for i, name in enumerate(["Anna Kovac", "Petr Lind", "Anna Kovac"])]
    v = j.judge(VIEW, docs)
    assert (v.verdict, v.leak) == ("Sufficient", False)
    assert j.judge(VIEW, docs[:1]).verdict == "Partial"
    assert j.judge(VIEW, [_doc(9, "A recipe for bread.")]).verdict == "Insufficient"
    assert j.judge(VIEW, []).verdict == "Insufficient"
    # coverage: one option of three named is below 0.5
    same = [_doc(i, "Anna Kovac held a rally in Veltria.") for i in range(3)]
    assert j.judge(VIEW, same).verdict == "Partial"


def test_offline_judge_leakage():
    j = OfflineJudge(min_relevant_docs=1)
    leak = j.judge(VIEW, [_doc(1, "Turnout was high. Petr Lind won the Veltria presidential election by six points.")])
    assert leak.leak and "d1" in leak.reasons
    later = j.judge(VIEW, [_doc(2, "The Veltria presidential vote was held on April 12, 2026 amid heavy rain.")])
    assert later.leak
    fine = j.judge(VIEW, [_doc(3, "The Veltria presidential vote will be held on April 12, 2026. Anna Kovac leads.")])
    assert not fine.leak


class _Server:
    """A chat-completions endpoint on 127.0.0.1 answering from a script (status, content) per request."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body))
                status, content = outer.script.pop(0) if outer.script else (500, "")
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *a):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def _client(url, retries=2):
    return ChatClient(base_url=url, model="judge-test", max_retries=retries, backoff_seconds=0.0, timeout_seconds=10)


def test_llm_judge_round_trip_with_retry_and_fenced_json():
    answer = '```json\n{"verdict": "sufficient", "leak": "false", "reasons": ["d1 covers polls"]}\n```'
    with _Server([(500, "boom"), (200, answer)]) as srv:
        v = LLMJudge(_client(srv.url)).judge(VIEW, [_doc(1, "x" * 5000)])
    assert (v.verdict, v.leak, v.reasons) == ("Sufficient", False, "d1 covers polls")
    path, body = srv.requests[-1]
    assert path == "/v1/chat/completions" and body["model"] == "judge-test"
    sent = json.loads(body["messages"][1]["content"])
    assert tuple(sent["event"]) == EVENT_VIEW_KEYS  # never label, prices or trajectory
    assert len(sent["evidence"][0]["text"]) == 2000
    assert "Sufficiency" in body["messages"][0]["content"]


def test_llm_judge_bad_verdict_is_retried_then_endpoint_error():
    with _Server([(200, '{"verdict": "Maybe"}'), (200, '{"verdict": "Partial", "leak": true}')]) as srv:
        v = LLMJudge(_client(srv.url)).judge(VIEW, [])
    assert (v.verdict, v.leak) == ("Partial", True)
    with _Server([]) as srv, pytest.raises(EndpointError, match="failed after 3 attempt"):
        LLMJudge(_client(srv.url)).judge(VIEW, [])


def test_endpoint_down_gives_judge_error_verdict():
    with _Server([]) as srv:
        client = _client(srv.url, retries=1)
        res = screen_event("pm-1", VIEW, None, LLMJudge(client), LLMDecomposer(client), corpus_start=date(2027, 1, 1))
    assert res.verdict == "error" and res.exclusion[0] == "judge_error"


def test_llm_decomposer_clips_and_cleans():
    answer = json.dumps({"predictive": ["Veltria polls Kovac", "who won Veltria election"] + [f"p{i}" for i in range(9)],
                         "background": ["Veltria electoral history"]})
    with _Server([(200, answer)]) as srv:
        dec = LLMDecomposer(_client(srv.url))(VIEW)
    assert len(dec.predictive) == 7 and 4 <= len(dec.background) <= 7
    assert "who Veltria election" in dec.predictive  # outcome word removed
    sent = json.loads(srv.requests[0][1]["messages"][1]["content"])
    assert tuple(sent) == EVENT_VIEW_KEYS


class RecordingJudge(OfflineJudge):
    """The offline judge, recording what it is given."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def judge(self, event_view, evidence):
        self.seen.append((dict(event_view), list(evidence)))
        return super().judge(event_view, evidence)


def test_screen_event_passes_only_the_view():
    judge = RecordingJudge()
    res = screen_event("pm-1", dict(VIEW), None, judge, decompose_offline, corpus_start=date(2027, 1, 1))
    assert tuple(judge.seen[0][0]) == EVENT_VIEW_KEYS and res.verdict == "Insufficient"
    bad = dict(VIEW, label="Anna Kovac")
    with pytest.raises(AssertionError):
        screen_event("pm-1", bad, None, judge, decompose_offline, corpus_start=date(2027, 1, 1))


def test_parse_json_object():
    assert parse_json_object('Sure! {"a": {"b": "}"}} trailing') == {"a": {"b": "}"}}
    with pytest.raises(ValueError):
        parse_json_object("no json here")


@pytest.mark.slow
def test_build_on_micro_judge_sees_no_outcome(micro_index, micro_world, tmp_path):
    """The real build hands the judge only the view; every judged view's keys are the allowed ones."""
    import shutil

    from forecast_env.envs.events.build import build_events

    ws = tmp_path / "ws"
    shutil.copytree(micro_index / "index", ws / "index")
    shutil.copytree(micro_index / "corpus", ws / "corpus")
    judge = RecordingJudge()
    summary = build_events(micro_world / "polymarket", ws, judge=judge, progress=False)
    assert judge.seen and summary["screened"] == len(judge.seen)
    for view, evidence in judge.seen:
        assert tuple(view) == EVENT_VIEW_KEYS
        assert all(str(e["day"]) <= view["tau_star"] for e in evidence)
