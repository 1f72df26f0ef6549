"""Runs and reports (eval/): the runner's throughput and the report's statistics."""
