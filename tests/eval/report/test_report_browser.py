"""The HTML report in a real browser: headless Chromium loads it, waits for every image, takes a
full-page screenshot, and the test fails on a broken image or a console error.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages
separated by NUL bytes on file descriptors 3 and 4), so no Python package or browser download is
needed: Debian's `chromium` package is enough (`apt-get install -y chromium`). Where no browser is
installed the tests skip and say so. FORECAST_ENV_CHROMIUM names another binary.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from forecast_env.eval.report.render import build_report
from tests.support.eval_data import write_reader_run

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome-headless-shell")
TIMEOUT_S = 60.0  # a hung browser fails the test instead of blocking the suite


def find_chromium() -> str | None:
    """The Chromium binary: $FORECAST_ENV_CHROMIUM, else the first of BROWSERS on the PATH."""
    env = os.environ.get("FORECAST_ENV_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


@dataclass
class PageCheck:
    """What the browser saw: images (alt, natural width, height), errors, the screenshot PNG."""

    images: list[tuple[str, int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    screenshot: bytes = b""

    @property
    def broken_images(self) -> list[str]:
        return [alt for alt, w, h in self.images if w == 0 or h == 0]


class DevTools:
    """A minimal DevTools-protocol client over Chromium's pipe transport."""

    def __init__(self, binary: str, profile: str) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # in the child: the pipe transport reads fd 3 and writes fd 4
            # moved above 10 first, so that neither dup2 can overwrite the other pipe end
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [binary, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                f"--user-data-dir={profile}", "about:blank"]
        # close_fds runs after preexec_fn: keeping 3 and 4 keeps the pipes wired there
        self.proc = subprocess.Popen(args, preexec_fn=wire, pass_fds=(3, 4),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer over the DevTools pipe")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the DevTools pipe (exit code {self.proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)


WAIT_FOR_IMAGES = """Promise.all(Array.from(document.images).map(img => img.complete ? null :
  new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })))
  .then(() => Array.from(document.images).map(img => [img.alt, img.naturalWidth, img.naturalHeight]))"""


def check_page(html: Path, binary: str) -> PageCheck:
    """Load `html` in headless Chromium, wait for every image, screenshot the whole page."""
    out = PageCheck()
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        dt = DevTools(binary, profile)
        try:
            target = dt.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = dt.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                dt.call(f"{domain}.enable", session=session)
            dt.call("Page.navigate", {"url": html.resolve().as_uri()}, session=session)
            dt.wait_event("Page.loadEventFired")
            res = dt.call("Runtime.evaluate", {"expression": WAIT_FOR_IMAGES, "awaitPromise": True,
                                               "returnByValue": True}, session=session)
            out.images = [tuple(x) for x in res["result"]["value"]]
            size = dt.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
            shot = dt.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}},
                session=session)
            out.screenshot = base64.b64decode(shot["data"])
            for ev in dt.events:
                p = ev.get("params", {})
                if ev.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                    out.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
                elif ev.get("method") == "Runtime.exceptionThrown":
                    out.errors.append(p.get("exceptionDetails", {}).get("text", "exception"))
                elif ev.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                    out.errors.append(p["entry"].get("text", "log error"))
        finally:
            dt.close()
    return out


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def png_is_blank(data: bytes) -> bool:
    """Whether every decoded scanline byte is the same (a blank page): IDAT inflated, filters ignored."""
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    return len(set(raw[: 1 << 20])) <= 2


CHROMIUM = find_chromium()
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason=(
    "no Chromium on this machine: install Debian's package (apt-get install -y chromium) or set "
    "FORECAST_ENV_CHROMIUM to a Chromium binary to check the HTML report in a real browser"))


@needs_browser
def test_report_renders_in_chromium_with_every_image(tmp_path):
    paths = build_report(write_reader_run(tmp_path / "run"))
    seen = check_page(Path(paths["html"]), CHROMIUM)
    assert seen.errors == [], f"console errors: {seen.errors}"
    assert len(seen.images) == len(paths["plots"]) == 5
    assert seen.broken_images == []
    assert all(w >= 300 and h >= 200 for _, w, h in seen.images)
    width, height = png_size(seen.screenshot)
    assert width >= 800 and height > 2000  # the whole page, not just the first screen
    assert not png_is_blank(seen.screenshot)


@needs_browser
def test_the_check_catches_a_broken_image_and_a_console_error(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!doctype html><html><body><p>x</p>"
                    "<img alt='broken' src='data:image/png;base64,AAAA'>"
                    "<script>console.error('planted error')</script></body></html>")
    seen = check_page(page, CHROMIUM)
    assert seen.broken_images == ["broken"]
    assert any("planted error" in e for e in seen.errors)


if __name__ == "__main__":  # check any report by hand: python tests/eval/report/test_report_browser.py REPORT.html [SHOT.png]
    import sys

    if CHROMIUM is None:
        sys.exit("no Chromium found (apt-get install -y chromium, or set FORECAST_ENV_CHROMIUM)")
    seen = check_page(Path(sys.argv[1]), CHROMIUM)
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_bytes(seen.screenshot)
    w, h = png_size(seen.screenshot)
    print(f"{len(seen.images)} images, {len(seen.broken_images)} broken, {len(seen.errors)} console errors, "
          f"page screenshot {w}x{h} px, blank: {png_is_blank(seen.screenshot)}")
    for e in seen.errors:
        print("  console:", e)
    sys.exit(1 if seen.broken_images or seen.errors else 0)
