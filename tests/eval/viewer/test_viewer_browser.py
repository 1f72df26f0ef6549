"""The run viewer in a real browser (Playwright driving the system Chromium, tests/support/browser.py), as a person
uses it: the events page (sort, filter, presets, switching agents), a question page (chart, transcripts, series and
compare), from the server and from a static folder opened from disk. The `page` fixture fails a test on any console
error, uncaught exception or failed request; screenshots are kept in test-artifacts/screenshots/.

The planted question (tests/eval/viewer/conftest.py) carries `</script>`, `<script>alert(1)</script>`, `<!--` and an
`<img onerror>` in its text, options and description: they must show as text, and no dialog may open.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from playwright.sync_api import Dialog, Page, expect

from tests.eval.viewer.conftest import EPISODE_RUN, PLANTED, PLANTED_QUESTION, WORLD_RUN, copy_workspace
from tests.support.browser import axe_violations, describe_violations, screenshot

TIMEOUT_MS = 30_000


#: what a model said, planted into the retrieval agent's part of the planted question (an LLM agent's messages)
SAID = "I read </script><script>alert(2)</script> and <img src=y onerror=alert(3)>: No."


@pytest.fixture(scope="module")
def ws(viewer_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = copy_workspace(viewer_base, tmp_path_factory.mktemp("viewer_browser") / "ws")
    part = out / "runs" / EPISODE_RUN / "parts" / "retrieval" / PLANTED / "r0.json"
    doc = json.loads(part.read_text())
    doc["messages"] = [{"role": "system", "content": "You are a forecaster."},
                       {"role": "user", "content": "Forecast: " + str(PLANTED_QUESTION["question"])},
                       {"role": "assistant", "content": SAID}]
    part.write_text(json.dumps(doc))
    return out


def _serve(run_dir: Path, compare: Path | None = None) -> Iterator[str]:
    from forecast_env.eval.viewer.server import make_server

    server = make_server(run_dir, compare=compare)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def served(ws: Path) -> Iterator[str]:
    yield from _serve(ws / "runs" / EPISODE_RUN)


@pytest.fixture()
def dialogs(page: Page) -> list[str]:
    """Every dialog (alert, confirm, prompt) the page opens: a planted script that ran would open one."""
    seen: list[str] = []

    def on_dialog(d: Dialog) -> None:
        seen.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    return seen


def _events(ws: Path) -> pl.DataFrame:
    return pl.read_parquet(ws / "runs" / EPISODE_RUN / "forecasts.parquet")


def _open_events(page: Page, url: str) -> None:
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.locator("#events-table tr[data-event-id]").first.wait_for()


def _check_planted_is_text(page: Page) -> None:
    title = page.locator("#page-title")
    expect(title).to_contain_text("</script><script>alert(1)</script>")
    body = page.locator("main").inner_text()
    assert "<img src=x onerror=alert(1)>" in body  # the option, shown as text
    assert page.locator("img[src='x']").count() == 0
    assert page.evaluate("() => [...document.querySelectorAll('script')].filter(s => !s.src).length") == 0


def test_events_page_sorts_filters_and_switches_agents(page: Page, served: str, ws: Path, dialogs: list[str]) -> None:
    _open_events(page, served)
    n_events = _events(ws)["event_id"].n_unique()
    rows = page.locator("#events-table tr[data-event-id]")
    expect(rows).to_have_count(n_events)
    expect(page.locator("#row-count")).to_contain_text(str(n_events))
    # sort by a Brier column, both ways: the first row changes and aria-sort says so
    button = page.locator("th[data-col] button[data-sort-key$='.brier']").first
    button.click()
    header = page.locator("th[aria-sort]")
    first_order = header.get_attribute("aria-sort")
    top = rows.first.get_attribute("data-event-id")
    button.click()
    assert header.get_attribute("aria-sort") != first_order
    assert rows.first.get_attribute("data-event-id") != top or n_events == 1
    # filter by option count: only the multi-option questions stay
    multi = _events(ws).filter(pl.col("options").list.len() > 2)["event_id"].n_unique()
    page.select_option("#filter-options", "more")
    expect(rows).to_have_count(multi)
    page.select_option("#filter-options", index=0)
    expect(rows).to_have_count(n_events)
    # search the planted question by its text
    page.fill("#search", "alert(1)")
    expect(rows).to_have_count(1)
    assert rows.first.get_attribute("data-event-id") == PLANTED
    page.fill("#search", "")
    expect(rows).to_have_count(n_events)
    # switch agents and use both presets
    agents = page.locator("#agent-select option")
    assert agents.count() == 2
    page.select_option("#agent-select", index=1)
    page.click("#preset-worst")
    page.click("#preset-disagree")
    expect(rows).to_have_count(n_events)
    screenshot(page, "viewer-events")
    violations = axe_violations(page)
    assert not violations, describe_violations(violations)
    assert dialogs == []


def test_question_page_chart_transcript_and_compare(page: Page, served: str, dialogs: list[str]) -> None:
    _open_events(page, served)
    page.click(f"tr[data-event-id='{PLANTED}'] a")
    page.locator("#chart svg").wait_for()
    _check_planted_is_text(page)
    # the chart: a market line and each series' points, the public and close days marked
    svg = page.locator("#chart svg")
    assert svg.locator("path, polyline").count() >= 2
    assert svg.locator("circle").count() >= 1
    expect(svg).to_contain_text("close")
    # the transcript: one block per date, the first open; the retrieval agent's searches with hits
    blocks = page.locator(".date-block")
    assert blocks.count() >= 1
    page.select_option("#series-select", label="retrieval")
    page.locator(".date-block").first.wait_for()
    # a model's messages, collapsed, shown as text: the planted </script> and onerror stay inert
    messages = page.locator(".messages").first
    messages.locator("summary").first.click()
    expect(messages).to_contain_text("</script><script>alert(2)</script>")
    assert page.locator("img[src='y']").count() == 0
    hits = page.locator(".search-hits li")
    assert hits.count() >= 1
    assert hits.first.inner_text().strip()
    # expand every date, then compare with the other series side by side
    for i in range(page.locator(".date-block").count()):
        block = page.locator(".date-block").nth(i)
        if block.get_attribute("open") is None:
            block.locator("summary").first.click()
    page.select_option("#compare-select", label="uniform")
    expect(page.locator(".series-col")).to_have_count(2)
    screenshot(page, "viewer-question")
    violations = axe_violations(page)
    assert not violations, describe_violations(violations)
    page.click("#back-link")
    page.locator("#events-table tr[data-event-id]").first.wait_for()
    assert dialogs == []


def test_keyboard_reaches_and_sorts(page: Page, served: str) -> None:
    _open_events(page, served)
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("() => !!document.activeElement.closest('th[data-col]')"):
            break
    else:
        pytest.fail("Tab never reached a sort button")
    before = page.locator("th[aria-sort]").count()
    page.keyboard.press("Enter")
    assert page.locator("th[aria-sort]").count() >= max(before, 1)


def test_static_folder_opens_from_disk(page: Page, ws: Path, tmp_path: Path, dialogs: list[str]) -> None:
    from forecast_env.eval.viewer.export import export_static

    out = tmp_path / "viewer"
    index = export_static(ws / "runs" / EPISODE_RUN, out)
    assert Path(index).is_file()
    data = "".join(p.read_text(encoding="utf-8") for p in (out / "data").rglob("*.js"))
    assert "</script>" not in data and "<!--" not in data
    _open_events(page, Path(index).resolve().as_uri())
    page.click(f"tr[data-event-id='{PLANTED}'] a")
    page.locator("#chart svg").wait_for()
    _check_planted_is_text(page)
    page.locator("details.description summary").click()  # the description, collapsed, as text
    expect(page.locator("details.description")).to_contain_text(str(PLANTED_QUESTION["description"])[:40])
    screenshot(page, "viewer-static-question")
    assert dialogs == []


def test_world_run_and_compare_in_the_server(page: Page, ws: Path) -> None:
    gen = _serve(ws / "runs" / WORLD_RUN, compare=ws / "runs" / EPISODE_RUN)
    url = next(gen)
    try:
        _open_events(page, url)
        assert page.locator("#agent-select option").count() == 4  # two agents in each run
        page.locator("#events-table tr[data-event-id] a").first.click()
        page.locator("#chart svg").wait_for()
        assert page.locator(".date-block").count() >= 1
    finally:
        shutil.rmtree(ws / "runs" / WORLD_RUN / "viewer_cache", ignore_errors=True)
        next(gen, None)


def test_the_report_links_each_question_to_its_viewer_page(page: Page, ws: Path, tmp_path: Path,
                                                          dialogs: list[str]) -> None:
    from forecast_env.eval.report.render import build_report

    paths = build_report(ws / "runs" / EPISODE_RUN, out=tmp_path / "report", plots=False, compare=False)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(Path(paths["html"]).resolve().as_uri())
    links = page.locator("a[href*='viewer/index.html#/q/']")
    assert links.count() == _events(ws)["event_id"].n_unique()
    page.locator(f"a[href$='#/q/{PLANTED}']").click()
    page.locator("#chart svg").wait_for()
    _check_planted_is_text(page)
    assert dialogs == []
