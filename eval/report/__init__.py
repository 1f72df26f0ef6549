"""The report of a run: metrics, bootstrap intervals, calibration, skill, evidence, plots, play modes (render.py writes it)."""
