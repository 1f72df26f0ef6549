"""The audit: six checks that the environment leaks nothing but the news (run.py runs them; docs/design.md §8)."""
