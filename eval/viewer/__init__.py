"""The run viewer (issue 41): a run's questions, forecasts, market and everything its agents did, in a browser.

    from forecast_env.eval.viewer import RunView, view

    view("WS/runs/RUN")                              # serve on 127.0.0.1 (a free port) until Ctrl-C
    view("WS/runs/RUN", out="viewer/")               # or write static files to open from disk
    RunView.open("WS/runs/RUN").question("pm-1")     # the data, as the page gets them

The data contract (JSON shapes, routes, static files, escaping) is tools/viewer_contract.md; the data are read by
`data.py` (with the parts' index of `index.py`, the one file the viewer writes, inside the run directory), served by
`server.py` and exported by `export.py`. The page itself is `static/`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from forecast_env.eval.viewer.data import RunView, UnknownQuestion

__all__ = ["RunView", "UnknownQuestion", "view"]


def view(run_dir: str | Path, compare: str | Path | None = None, out: str | Path | None = None,
         events: Sequence[str] | None = None, port: int = 0, open_browser: bool = False) -> Path | None:
    """Serve the viewer of the run in `run_dir` (and `compare`) until Ctrl-C, or, with `out`, write it as static
    files and return the path of their index.html. `events`: only these questions."""
    if out is not None:
        from forecast_env.eval.viewer.export import export_static

        return export_static(run_dir, out, compare=compare, events=events)
    from forecast_env.eval.viewer.server import serve

    serve(run_dir, compare=compare, port=port, open_browser=open_browser,
          events=list(events) if events is not None else None)
    return None
