"""The run viewer's server (eval/viewer/server.py: 127.0.0.1 only, fixed routes, 404/405/403, security headers),
its static export (eval/viewer/export.py: the .js data files escape </script> and <!-- and read back to the same
data) and `forecast-env view`. No browser."""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from forecast_env.cli.main import main as cli_main
from forecast_env.errors import RunError
from forecast_env.eval.viewer import RunView, view
from forecast_env.eval.viewer.export import export_static, js_json
from forecast_env.eval.viewer.server import CSP, ViewerServer, make_server, serve
from tests.eval.viewer.conftest import EPISODE_RUN, EVIL, PLANTED, PLANTED_QUESTION, copy_workspace


@pytest.fixture(scope="module")
def run_dir(viewer_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace(viewer_base, tmp_path_factory.mktemp("viewer_server") / "ws") / "runs" / EPISODE_RUN


@pytest.fixture(scope="module")
def server(run_dir: Path) -> Iterator[ViewerServer]:
    srv = make_server(run_dir)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def _request(srv: ViewerServer, path: str, method: str = "GET",
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with `path` sent exactly as given (no client-side normalisation)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=30)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_binds_loopback_and_serves_the_api(server: ViewerServer) -> None:
    assert server.server_address[0] == "127.0.0.1" and server.server_address[1] > 0
    status, headers, body = _request(server, "/api/run")
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert headers["x-content-type-options"] == "nosniff" and headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    run = json.loads(body)
    assert run["run_id"] == EPISODE_RUN and run["static"] is False and run["n_events"] == 5
    status, _, body = _request(server, "/api/events")
    events = json.loads(body)["events"]
    assert status == 200 and PLANTED in [e["event_id"] for e in events]
    assert all(e["data_file"] is None for e in events)
    status, _, body = _request(server, "/api/question?id=" + PLANTED.replace("-", "%2D"))
    q = json.loads(body)
    assert status == 200 and q["event"]["question"] == PLANTED_QUESTION["question"]
    assert q["event"]["options"] == PLANTED_QUESTION["options"] and EVIL in q["event"]["description"]
    for path in ("/", "/index.html"):
        status, headers, body = _request(server, path)
        assert status == 200 and headers["content-type"].startswith("text/html") and b"<html" in body.lower()
        assert b"<script>" not in body.lower()  # no inline script (CSP script-src 'self')
    status, headers, _ = _request(server, "/static/app.js")
    assert status in (200, 404) and headers["content-type"].startswith(("text/javascript", "application/json"))
    status, headers, body = _request(server, "/api/run", method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0


@pytest.mark.parametrize("path", [
    "/../run.json", "/static/../../etc/passwd", "/%2e%2e/", "/%2e%2e/run.json", "/run.json", "/viewer_index.parquet",
    "/static/", "/static/index.html", "/static/app.js/../../run.json", "/parts/uniform", "/api/question?id=../../x",
    "/api/question?id=nope", "/api/question", "/api/question?id=a&id=b", "/api/runs", "//etc/passwd",
])
def test_everything_else_is_a_json_404(server: ViewerServer, path: str) -> None:
    status, headers, body = _request(server, path)
    assert status == 404 and headers["content-type"].startswith("application/json")
    assert "error" in json.loads(body) and headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_other_methods_are_405(server: ViewerServer, method: str) -> None:
    status, headers, body = _request(server, "/api/run", method=method)
    assert status == 405 and headers["allow"] == "GET, HEAD" and "error" in json.loads(body)


def test_a_foreign_host_header_is_refused(server: ViewerServer) -> None:
    status, _, body = _request(server, "/api/run", headers={"Host": "attacker.example:80"})
    assert status == 403 and "127.0.0.1" in json.loads(body)["error"]


def test_ctrl_c_stops_the_server_cleanly(run_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    closed = []

    def interrupted(self: ViewerServer, *args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ViewerServer, "serve_forever", interrupted)
    monkeypatch.setattr(ViewerServer, "server_close", lambda self: closed.append(self.server_address))
    serve(run_dir)  # returns: no exception
    out = capsys.readouterr().out
    assert re.search(r"http://127\.0\.0\.1:\d+/", out) and "stopped" in out and closed


def _load_js(path: Path) -> tuple[str, object]:
    """(the assignment target, the JSON value) of one data file."""
    prelude, line = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    assert prelude.startswith("window.VIEWER_DATA = window.VIEWER_DATA ||")
    target, _, value = line.partition(" = ")
    assert value.endswith(";")
    return target, json.loads(value[:-1])


def test_the_static_export_escapes_and_reads_back(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    index = export_static(run_dir, out)
    html = index.read_text()
    data_tags = html.index('<script src="data/run.js">'), html.index('<script src="data/events.js">')
    assert max(data_tags) < html.index('src="static/app.js"') or "static/app.js" not in html
    live = RunView.open(run_dir)
    files = sorted((out / "data").rglob("*.js"))
    assert len(files) == 2 + len(live.event_ids)
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "</script" not in text.lower() and "<!--" not in text and "<" not in text and "\u2028" not in text
    target, run = _load_js(out / "data" / "run.js")
    assert target == "window.VIEWER_DATA.run" and isinstance(run, dict) and run["static"] is True
    target, events = _load_js(out / "data" / "events.js")
    assert target == "window.VIEWER_DATA.events" and isinstance(events, dict)
    rows = {r["event_id"]: r for r in events["events"]}
    assert rows[PLANTED]["question"] == PLANTED_QUESTION["question"]
    names = [r["data_file"] for r in events["events"]]
    assert names == [f"q/{n:06d}.js" for n in range(1, len(names) + 1)]  # a counter, never the event id
    target, question = _load_js(out / "data" / rows[PLANTED]["data_file"])
    assert target == 'window.VIEWER_DATA.questions["q-evil"]'
    assert question == json.loads(json.dumps(live.question(PLANTED)))
    assert isinstance(question, dict) and question["event"]["description"] == PLANTED_QUESTION["description"]
    assert question["event"]["options"] == PLANTED_QUESTION["options"]
    # the planted option reaches the notebook claims and the searches of the retrieval agent
    retrieval = next(s for s in question["series"] if s["agent"] == "retrieval")
    claims = [n["claim"] for ro in retrieval["rollouts"] for d in ro["dates"] for n in d["notebook"]]
    queries = [e["query"] for ro in retrieval["rollouts"] for d in ro["dates"] for e in d["events"]
               if e["kind"] == "search"]
    assert any("<img src=x onerror=alert(1)>" in c for c in claims) and any("</script>" in q for q in queries)
    assert js_json("</script><!--\u2028&") == '"\\u003c/script\\u003e\\u003c!--\\u2028\\u0026"'


def test_a_large_run_needs_events(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forecast_env.eval.viewer import export as export_mod

    monkeypatch.setattr(export_mod, "MAX_QUESTION_SERIES", 3)
    with pytest.raises(RunError, match="--events"):
        export_static(run_dir, tmp_path / "big")
    index = view(run_dir, out=tmp_path / "some", events=[PLANTED])
    assert index is not None and [p.name for p in (tmp_path / "some" / "data" / "q").iterdir()] == ["000001.js"]


def test_the_view_command(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["view", "--run", str(run_dir), "--out", str(tmp_path / "site"), "--events", PLANTED]) == 0
    assert (tmp_path / "site" / "index.html").exists() and "viewer:" in capsys.readouterr().out
    ws = run_dir.parent.parent
    assert cli_main(["view", "--workspace", str(ws), "--run-id", EPISODE_RUN, "--compare", "nope",
                     "--out", str(tmp_path / "x")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert cli_main(["view", "--run", str(tmp_path / "missing")]) == 2
