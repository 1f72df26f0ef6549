"""Deterministic sample worlds: CC-NEWS-style WARC files, a Polymarket API cache and the ground truth.

    from forecast_env.synth import synthesize, PRESETS
    summary = synthesize("sample", preset="micro", seed=0)

See `generate.synthesize` for the layout written and `presets.PRESETS` for the sizes.
"""

from forecast_env.synth.generate import synthesize
from forecast_env.synth.presets import PRESETS, Preset

__all__ = ["PRESETS", "Preset", "synthesize"]
