"""The events build: from Polymarket responses or a questions file to WS/events (docs/design.md §4)."""
