"""forecast-env: an offline, replayable environment for LLM forecasting agents.

The code folders of a source checkout (`corpus_build/`, `envs/`, `agents/`, `eval/`, `adapters/`,
`synth/`) are the subpackages `forecast_env.corpus_build`, ... (pyproject's `package-dir`); a wheel
and the editable install (a link tree, which type checkers follow) lay them out under this package.
When this package is imported straight from the checkout's own `forecast_env/` folder (`python -m`
from the repository root puts the root first on `sys.path`), the root joins `__path__`, so that
those names resolve to the sibling folders there too.
"""

from pathlib import Path as _Path

_here = _Path(__file__).parent
if not (_here / "envs").is_dir() and (_here.parent / "envs" / "__init__.py").is_file():
    __path__.append(str(_here.parent))
del _Path, _here
