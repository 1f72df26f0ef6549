"""The index and search (forecast_env/retrieval/, corpus_build/index.py): embedding, BM25, dense and hybrid.

search_speed (BM25 vs rank_bm25 / bm25s, dense vs a raw FAISS scan), search_quality (recall and nDCG per
backend), embedding_backends (ONNX / static vs torch; token budgets), bm25_pruning, ivf_vs_exact,
index_at_scale (the 10M-article index), batched_search (many sessions), determinism (the same answers on
any machine).
"""
