"""Runs: the store of WS/runs/<id>/ (store.py), the runner that plays agents, exports and releases."""
