"""Real-browser tests: Playwright (the `playwright` package of the dev extra) drives the system Chromium.

Playwright never downloads a browser here (no `playwright install`): it launches Debian's `chromium`
(`apt-get install -y chromium`; CI installs it from .ci/required-tools) or the binary that
FORECAST_ENV_CHROMIUM names. Where neither Chromium nor Playwright is there, the tests that use the `browser`
fixture skip and say what to install (in CI, FORECAST_ENV_CI=1, tests/conftest.py turns that skip into a
failure). tests/conftest.py registers this module as a plugin, so its fixtures are there for every test:

- `browser`: one headless Chromium per test session (per xdist worker), started by the first test that asks;
- `page`: a fresh page in a fresh browser context; at teardown it fails the test on any console error,
  uncaught page exception or failed request it saw, naming them (`page_problems` holds them meanwhile: a
  test that plants errors on purpose reads them and calls its `clear()`). A failed test's page is
  screenshotted to the artifacts folder;
- `screenshot(page, name)`: a full-page PNG kept after the run, under test-artifacts/screenshots/ at the
  repository root (git-ignored) or $FORECAST_ENV_ARTIFACTS/screenshots/;
- `image_sizes(page)` / `broken_images(page)`: every <img>, once loaded: (name, natural width, height),
  and the ones that did not load;
- `axe_violations(page, impact=...)`: the accessibility check of axe-core (axe-playwright-python bundles
  it; offline), its violations of the given impacts.

A live sync Playwright marks its event loop as the thread's running loop between calls, so that
`asyncio.run()` would refuse to run in the same thread. The session's browser outlives a browser test, so
the hooks below unset that mark after every test and set it again before a test that uses the browser.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.paths import REPO

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, ViewportSize

#: the names Chromium goes by on the PATH, in the order tried
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome-headless-shell")
#: a hung browser fails the test instead of blocking the suite
TIMEOUT_MS = 60_000
VIEWPORT: ViewportSize = {"width": 1280, "height": 900}
NO_CHROMIUM = ("no Chromium on this machine: install Debian's package (apt-get install -y chromium) or set "
               "FORECAST_ENV_CHROMIUM to a Chromium binary to run the tests in a real browser")
NO_PLAYWRIGHT = ("the playwright package is missing: install the dev extra (make venv, or pip install -c "
                 "constraints.txt -e '.[dev]'); it drives the system Chromium, no `playwright install` needed")


def find_chromium() -> str | None:
    """The Chromium binary: $FORECAST_ENV_CHROMIUM, else the first of BROWSERS on the PATH."""
    env = os.environ.get("FORECAST_ENV_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def missing() -> str | None:
    """Why the browser tests cannot run here (the skip reason), or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return NO_PLAYWRIGHT
    return None if find_chromium() else NO_CHROMIUM


def driver_fault() -> str | None:
    """Why Playwright's driver (the Node.js that its wheel bundles) does not run here, or None. On Debian it needs
    libatomic1, which neither `chromium` nor python3.11 pulls in (a fresh Debian 12 lacks it)."""
    try:
        from playwright._impl._driver import compute_driver_executable

        node = compute_driver_executable()[0]
    except Exception:  # another layout of the package: its own launch says what is wrong
        return None
    try:
        run = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        return f"Playwright's driver {node} does not start: {exc}"
    if run.returncode == 0:
        return None
    why = (run.stderr.strip().splitlines() or [f"exit code {run.returncode}"])[-1]
    return (f"Playwright's driver does not run here ({why}); on Debian install what it needs: "
            "apt-get install -y libatomic1 (.ci/required-tools)")


@contextmanager
def launch(binary: str | None = None) -> Iterator[Browser]:
    """Headless Chromium driven by Playwright (outside pytest: the `__main__` checks). Playwright starts it
    without the sandbox (its default, chromium_sandbox=False), so it runs as root too."""
    from playwright.sync_api import sync_playwright

    binary = binary or find_chromium()
    if binary is None:
        raise RuntimeError(NO_CHROMIUM)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=binary, headless=True, timeout=TIMEOUT_MS)
        try:
            yield browser
        finally:
            browser.close()


def artifacts_dir() -> Path:
    """Where the test artifacts are kept: $FORECAST_ENV_ARTIFACTS, else test-artifacts/ at the repository root."""
    return Path(os.environ.get("FORECAST_ENV_ARTIFACTS") or REPO / "test-artifacts")


def screenshot(page: Page, name: str) -> Path:
    """A full-page PNG of `page`, kept as <artifacts>/screenshots/<name>.png (the name made file-safe)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "page"
    path = artifacts_dir() / "screenshots" / f"{safe.removesuffix('.png')}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True, timeout=TIMEOUT_MS)
    return path


@dataclass
class PageProblems:
    """What went wrong on a page: console errors (and failed console.assert calls), uncaught exceptions, and
    requests that failed (a network error, or an HTTP status of 400 or more)."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)

    def messages(self) -> list[str]:
        return ([f"console: {m}" for m in self.console_errors] + [f"uncaught: {m}" for m in self.page_errors]
                + [f"request: {m}" for m in self.failed_requests])

    def clear(self) -> None:
        for found in (self.console_errors, self.page_errors, self.failed_requests):
            found.clear()


def watch(page: Page, found: PageProblems | None = None) -> PageProblems:
    """Record the problems of `page` from now on (into `found`, else a new PageProblems). Over HTTP, headless
    Chromium asks for /favicon.ico by itself: its 404 is no problem of the page."""
    found = PageProblems() if found is None else found

    def on_console(msg: Any) -> None:
        loc = msg.location or {}
        if msg.type in ("error", "assert") and not str(loc.get("url", "")).endswith("/favicon.ico"):
            where = f" ({loc.get('url')}:{loc.get('lineNumber')})" if loc.get("url") else ""
            found.console_errors.append(f"{msg.text}{where}")

    def on_response(response: Any) -> None:
        if response.status >= 400:
            found.failed_requests.append(f"{response.request.method} {response.url}: HTTP {response.status}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: found.page_errors.append(exc.stack or str(exc)))
    page.on("requestfailed", lambda req: found.failed_requests.append(f"{req.method} {req.url}: {req.failure}"))
    page.on("response", on_response)
    return found


@contextmanager
def open_page(browser: Browser, found: PageProblems | None = None) -> Iterator[tuple[Page, PageProblems]]:
    """A fresh page in a fresh context of `browser` and its recorded problems (into `found`, else a new
    PageProblems); closed on the way out."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        yield page, watch(page, found)
    finally:
        context.close()


# every <img>, once it has loaded or failed: lazy ones are made eager first (they would wait for a scroll)
IMAGE_SIZES = """async () => {
  const imgs = Array.from(document.images);
  for (const img of imgs) if (!img.complete && img.loading === 'lazy') img.loading = 'eager';
  await Promise.all(imgs.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener('load', done); img.addEventListener('error', done); })));
  return imgs.map(img => [img.alt || img.currentSrc.slice(0, 80) || img.outerHTML.slice(0, 80),
                          img.complete ? img.naturalWidth : 0, img.complete ? img.naturalHeight : 0]);
}"""


def image_sizes(page: Page) -> list[tuple[str, int, int]]:
    """Every <img> of `page` once it has loaded or failed: (its alt text, else its source), natural width, height."""
    return [(name, w, h) for name, w, h in page.evaluate(IMAGE_SIZES)]


def broken_images(page: Page) -> list[str]:
    """The images of `page` that did not load (not complete, or no natural size): their alt text or source."""
    return [name for name, w, h in image_sizes(page) if w == 0 or h == 0]


def axe_violations(page: Page, impact: tuple[str, ...] = ("serious", "critical"),
                   options: dict | None = None) -> list[dict[str, Any]]:
    """axe-core's accessibility violations on `page` (bundled with axe-playwright-python: no network) whose impact
    is one of `impact` (axe's minor, moderate, serious, critical); `options` go to axe.run."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"resultTypes": ["violations"], **(options or {})})
    return [v for v in results.response["violations"] if v.get("impact") in impact]


def describe_violations(violations: list[dict[str, Any]], nodes: int = 3) -> str:
    """One line per violation (rule, impact, help, how many elements) and the first `nodes` elements' selectors."""
    lines = []
    for v in violations:
        targets = ", ".join(" ".join(map(str, n.get("target", []))) for n in v.get("nodes", [])[:nodes])
        lines.append(f"{v['id']} ({v.get('impact')}): {v.get('help')} [{len(v.get('nodes', []))} elements: {targets}]")
    return "\n".join(lines)


# ---- the pytest plugin (tests/conftest.py: pytest_plugins) ----

_LOOP: dict[str, asyncio.AbstractEventLoop] = {}  # the session's Playwright loop, while it runs
_FAILED = pytest.StashKey[bool]()


def _uses_browser(item: pytest.Item) -> bool:
    return "browser" in getattr(item, "fixturenames", ())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    if _uses_browser(item) and "loop" in _LOOP:
        asyncio._set_running_loop(_LOOP["loop"])  # Playwright's own state between its calls
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    if "loop" in _LOOP:
        asyncio._set_running_loop(None)  # the next test may run asyncio.run()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, Any, None]:
    outcome = yield
    if call.when == "call" and outcome.get_result().failed:
        item.stash[_FAILED] = True


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Headless Chromium (Playwright on the system binary), one per session; skips, saying what to install,
    where Playwright or Chromium is missing."""
    reason = missing() or driver_fault()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    loop = _LOOP["loop"] = asyncio.get_running_loop()  # marked running by Playwright until it stops
    try:
        chromium = pw.chromium.launch(executable_path=find_chromium(), headless=True, timeout=TIMEOUT_MS)
        try:
            yield chromium
        finally:
            asyncio._set_running_loop(loop)  # the session may end after a test that did not use the browser
            chromium.close()
    finally:
        asyncio._set_running_loop(loop)
        del _LOOP["loop"]
        pw.stop()


@pytest.fixture()
def page_problems() -> PageProblems:
    """The problems that the `page` fixture's page has had so far (the page's teardown asserts there are none)."""
    return PageProblems()


@pytest.fixture()
def page(browser: Browser, page_problems: PageProblems, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh page (1280x900 viewport, its own context); fails the test at teardown on a console error, an
    uncaught exception or a failed request, listing them; screenshots the page when the test failed."""
    with open_page(browser, page_problems) as (pg, _):
        yield pg
        if request.node.stash.get(_FAILED, False):
            try:
                print(f"page at failure: {screenshot(pg, request.node.nodeid + '-failed')}")
            except Exception as exc:  # a crashed page: the test's own failure says more
                print(f"no screenshot of the failed page: {exc}")
    problems = page_problems.messages()
    assert not problems, f"the page had {len(problems)} problem(s):\n" + "\n".join(problems)
