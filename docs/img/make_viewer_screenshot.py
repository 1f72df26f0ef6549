"""Regenerate docs/img/viewer-question.png, the run viewer's question page shown in docs/viewer.md.

    make demo                                   # a run to show (demo_ws/runs/demo-tiny-seed0-...)
    .venv/bin/python docs/img/make_viewer_screenshot.py [--run demo_ws/runs/RUN] [--event EVENT_ID]

Serves the run with the viewer's own server on 127.0.0.1, opens the question page in headless Chromium through
Playwright (the system Chromium: FORECAST_ENV_CHROMIUM or chromium on the PATH, as the browser tests find it),
picks the `retrieval` series and compares it with `uniform` when the run has them, and saves a 1280-wide
screenshot of the top of the page (the chart and the first date's transcript).
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def main() -> None:
    sys.path.insert(0, str(REPO))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, default=None, help="a run directory (default: the newest demo_ws run)")
    ap.add_argument("--event", default=None, help="the question to show (default: the first multi-option one)")
    ap.add_argument("--out", type=Path, default=HERE / "viewer-question.png")
    args = ap.parse_args()
    run = args.run or max((REPO / "demo_ws" / "runs").glob("demo-*"), key=lambda p: p.stat().st_mtime, default=None)
    if run is None:
        sys.exit("no run: run `make demo` first, or pass --run WS/runs/ID")
    from forecast_env.eval.viewer import RunView
    from forecast_env.eval.viewer.server import make_server
    from tests.support.browser import launch, open_page

    events = RunView.open(run).events()["events"]
    event = args.event or next((e["event_id"] for e in events if e.get("n_options", 2) > 2), events[0]["event_id"])
    server = make_server(run)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with launch() as browser, open_page(browser) as (page, problems):
            page.set_viewport_size({"width": 1280, "height": 1400})
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/#/q/{event}")
            page.locator("#chart svg").wait_for(timeout=30_000)
            labels = page.locator("#series-select option").all_inner_texts()
            if "retrieval" in labels:
                page.select_option("#series-select", label="retrieval")
            if "uniform" in labels:
                page.select_option("#compare-select", label="uniform")
            page.locator(".date-block").first.wait_for()
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=False)
            if problems.messages():
                sys.exit(f"the page reported problems: {problems.messages()}")
    finally:
        server.shutdown()
        server.server_close()
    print(f"wrote {args.out} ({run.name}, {event})")


if __name__ == "__main__":
    main()
