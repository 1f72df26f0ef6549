"""forecast-env: an offline, replayable environment for LLM forecasting agents.

The code folders of the repository (`corpus_build/`, `envs/`, `agents/`, `eval/`, `adapters/`,
`synth/`) are the subpackages `forecast_env.corpus_build`, ...: `forecast_env/<folder>` is a symbolic
link to `../<folder>`, so Python, the wheel, mypy and grimp all see one ordinary package
(docs/ARCHITECTURE.md, "How the folders become one package").
"""
