"""The workspace on object storage: remote units, markers, staging (remote.py)."""
