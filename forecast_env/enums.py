"""The project's enumerations, each defined once: a light module (it imports nothing) so that the CLI's
argument parser and the config loader can name the choices without loading what implements them
(the executor, faiss, torch)."""

#: Executors of the corpus build and the benchmark run (`forecast_env.executor.map_unordered`).
ENGINES: tuple[str, ...] = ("local", "ray")
#: Search modes of the Searcher and of the `search` tool (docs/design.md §3): rank fusion of dense and
#: BM25, dense alone, BM25 alone.
SEARCH_MODES: tuple[str, ...] = ("hybrid", "dense", "bm25")
#: The event splits an environment or a run can take (`all`: both).
SPLITS: tuple[str, ...] = ("train", "eval", "all")
#: How a run plays (docs/design.md §5): one event per episode, or every question on one shared clock.
PLAY_MODES: tuple[str, ...] = ("episode", "world")
