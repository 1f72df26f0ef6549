"""The run viewer as static files, opened from disk (file://, where a page cannot fetch() files):

    OUT/index.html              the page's index.html with <script src="data/run.js"> and data/events.js at its
                                <!-- VIEWER_DATA --> marker (else before app.js)
    OUT/static/app.js, OUT/static/style.css
    OUT/data/run.js             window.VIEWER_DATA.run = {...}      (api/run, with "static": true)
    OUT/data/events.js          window.VIEWER_DATA.events = {...}   (api/events; each row's data_file names its file)
    OUT/data/q/000001.js ...    window.VIEWER_DATA.questions["<event id>"] = {...}, one file per question, named by a
                                counter (never by the event id)

Every JSON written into a .js file goes through `js_json`: `<`, `>`, `&`, U+2028 and U+2029 escaped, so `</script>`,
`<!--` and line separators in the data are inert. A run with more than `MAX_QUESTION_SERIES` questions x series is
refused unless `events` selects the questions.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forecast_env.errors import RunError
from forecast_env.eval.viewer.data import RunView
from forecast_env.eval.viewer.server import STATIC_DIR, page_file
from forecast_env.store import atomic_write_bytes, atomic_write_text

#: The largest export without --events: questions x series.
MAX_QUESTION_SERIES = 2000
#: Where the page's index.html takes the data scripts.
MARKER = "<!-- VIEWER_DATA -->"
PRELUDE = "window.VIEWER_DATA = window.VIEWER_DATA || {questions: {}};\n"
_DATA_TAGS = '<script src="data/run.js"></script>\n<script src="data/events.js"></script>\n'
_APP_TAG = re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:\./)?static/app\.js[\"']?[^>]*>", re.IGNORECASE)
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_ESCAPE = re.compile("[<>&\u2028\u2029]")


def js_json(obj: Any) -> str:
    """JSON safe to put inside a <script> file or element (see the module docstring); JSON.parse reads it back."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str)
    return _ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], text)


def with_data_scripts(html: str) -> str:
    """The page's index.html with the two data scripts at its `<!-- VIEWER_DATA -->` marker, else right before the
    app's script, else before </body>."""
    if MARKER in html:
        return html.replace(MARKER, _DATA_TAGS.rstrip("\n"), 1)
    m = _APP_TAG.search(html)
    if m is not None:
        return html[: m.start()] + _DATA_TAGS + html[m.start():]
    end = html.lower().rfind("</body>")
    at = end if end >= 0 else len(html)
    return html[:at] + _DATA_TAGS + html[at:]


def export_static(run_dir: str | Path, out_dir: str | Path, compare: str | Path | None = None,
                  events: Sequence[str] | None = None) -> Path:
    """Write the static viewer of the run in `run_dir` (and `compare`) to `out_dir`; returns OUT/index.html.
    `events`: only these questions (required above `MAX_QUESTION_SERIES` questions x series)."""
    view = RunView.open(run_dir, compare=compare, events=list(events) if events is not None else None)
    size = len(view.event_ids) * max(1, len(view.series))
    if events is None and size > MAX_QUESTION_SERIES:
        raise RunError(f"{len(view.event_ids)} questions x {len(view.series)} series = {size} question pages is more "
                       f"than a static export holds ({MAX_QUESTION_SERIES}); choose questions with --events id1,id2 "
                       "or browse the run with the server (forecast-env view without --out)")
    out = Path(out_dir)
    (out / "data" / "q").mkdir(parents=True, exist_ok=True)
    (out / "static").mkdir(parents=True, exist_ok=True)
    html = (page_file("index.html") or b"").decode("utf-8")
    for name in ("app.js", "style.css"):
        src = STATIC_DIR / name
        if src.exists():
            shutil.copyfile(src, out / "static" / name)
    run = {**view.run_summary(), "static": True}
    listing = view.events()
    for n, row in enumerate(listing["events"], start=1):
        row["data_file"] = f"q/{n:06d}.js"
        question = view.question(row["event_id"])
        atomic_write_text(out / "data" / row["data_file"],
                          PRELUDE + f"window.VIEWER_DATA.questions[{js_json(row['event_id'])}] = "
                          f"{js_json(question)};\n")
    atomic_write_text(out / "data" / "run.js", PRELUDE + f"window.VIEWER_DATA.run = {js_json(run)};\n")
    atomic_write_text(out / "data" / "events.js", PRELUDE + f"window.VIEWER_DATA.events = {js_json(listing)};\n")
    index = out / "index.html"
    atomic_write_bytes(index, with_data_scripts(html).encode("utf-8"))
    return index
