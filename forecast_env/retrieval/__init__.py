"""Date-restricted retrieval over the indexed corpus (SPEC 3): BM25 as of a date, exact dense search
over month shards, hybrid reciprocal-rank fusion, and `open_article` with a date recheck."""

from forecast_env.retrieval.searcher import MODES, Article, Hit, QueryError, Searcher

__all__ = ["MODES", "Article", "Hit", "QueryError", "Searcher"]
