"""The run viewer's local HTTP server: the page and its JSON API, on 127.0.0.1 only.

    serve("WS/runs/RUN")                     # prints the URL (a free port), serves until Ctrl-C
    server = make_server("WS/runs/RUN")      # the server object (tests start it in a thread)

Routes (GET and HEAD; any other method 405), each a fixed name, never a path built from the URL:

    /, /index.html        the page (eval/viewer/static/index.html; a placeholder while the page is not installed)
    /static/app.js, /static/style.css
    /api/run, /api/events, /api/question?id=EVENT   (data.RunView; JSON)

Anything else is 404 with a JSON error, as is an unknown question id. Every answer carries its Content-Type,
`X-Content-Type-Options: nosniff`, a strict Content-Security-Policy (no inline script, nothing from elsewhere),
`Referrer-Policy: no-referrer` and `Cache-Control: no-store`. A request whose Host header is not this machine's
loopback address is refused (403), so a web page elsewhere cannot reach the server through DNS rebinding.
"""

from __future__ import annotations

import json
import sys
import threading
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from forecast_env.eval.viewer.data import RunView, UnknownQuestion

#: The one address the server binds.
HOST = "127.0.0.1"
#: The package folder of the page.
STATIC_DIR = Path(__file__).resolve().parent / "static"
#: URL path -> (file of STATIC_DIR, content type): the only files served.
STATIC_FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/style.css": ("style.css", "text/css; charset=utf-8"),
}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
PLACEHOLDER = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>forecast-env run viewer</title></head>
<body><h1>forecast-env run viewer</h1>
<p>The viewer page is not installed (eval/viewer/static/index.html). The data are served at
<a href="api/run">api/run</a>, <a href="api/events">api/events</a> and api/question?id=EVENT.</p>
</body></html>
"""


def page_file(name: str) -> bytes | None:
    """A file of the page (`STATIC_FILES` names only); the placeholder for a missing index.html."""
    path = STATIC_DIR / name
    try:
        return path.read_bytes()
    except OSError:
        return PLACEHOLDER.encode() if name == "index.html" else None


class ViewerServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer holding the RunView it answers from."""

    daemon_threads = True

    def __init__(self, view: RunView, port: int = 0) -> None:
        self.view = view
        super().__init__((HOST, port), ViewerHandler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"


class ViewerHandler(BaseHTTPRequestHandler):
    """GET/HEAD of the fixed routes (see the module docstring)."""

    server: ViewerServer
    def version_string(self) -> str:
        return "forecast-env-viewer"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the terminal shows the URL and the stop line only

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Frame-Options", "DENY")
        if status == HTTPStatus.METHOD_NOT_ALLOWED:
            self.send_header("Allow", "GET, HEAD")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").strip().lower()
        port = self.server.server_address[1]
        return host in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1", "localhost")

    def do_GET(self) -> None:
        if not self._host_ok():
            self._error(HTTPStatus.FORBIDDEN, "this viewer answers requests to 127.0.0.1 only")
            return
        url = urlsplit(self.path)
        path = url.path
        try:
            if path in STATIC_FILES:
                name, ctype = STATIC_FILES[path]
                body = page_file(name)
                if body is None:
                    self._error(HTTPStatus.NOT_FOUND, f"{name} is not installed")
                else:
                    self._send(HTTPStatus.OK, body, ctype)
            elif path == "/api/run":
                self._json(HTTPStatus.OK, self.server.view.run_summary())
            elif path == "/api/events":
                self._json(HTTPStatus.OK, self.server.view.events())
            elif path == "/api/question":
                ids = parse_qs(url.query, keep_blank_values=True).get("id") or []
                if len(ids) != 1:
                    self._error(HTTPStatus.NOT_FOUND, "give one question id: api/question?id=EVENT")
                    return
                try:
                    self._json(HTTPStatus.OK, self.server.view.question(ids[0]))
                except UnknownQuestion:
                    self._error(HTTPStatus.NOT_FOUND, f"no question {ids[0][:200]!r} in this run")
            else:
                self._error(HTTPStatus.NOT_FOUND, "not found")
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # a bug or unreadable data: one JSON error, the server goes on
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {str(exc)[:300]}")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _not_allowed(self) -> None:
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} is not allowed; the viewer is read-only")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed


def make_server(run_dir: str | Path, compare: str | Path | None = None, port: int = 0,
                events: list[str] | None = None) -> ViewerServer:
    """The viewer's server on 127.0.0.1:`port` (0: a free port), not started: `serve_forever()` it (a test in a
    thread), `shutdown()` and `server_close()` after."""
    return ViewerServer(RunView.open(run_dir, compare=compare, events=events), port)


def serve(run_dir: str | Path, compare: str | Path | None = None, port: int = 0, open_browser: bool = False,
          events: list[str] | None = None) -> None:
    """Serve the viewer of the run in `run_dir` until Ctrl-C; prints the URL (and opens it with `open_browser`)."""
    server = make_server(run_dir, compare=compare, port=port, events=events)
    server.view.prepare()
    for note in server.view.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"run viewer: {server.url}  (Ctrl-C to stop)", flush=True)
    if open_browser:
        threading.Timer(0.3, webbrowser.open, args=(server.url,)).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("run viewer stopped", flush=True)
    finally:
        server.server_close()
