"""ForecastBench rounds: reading the published question and resolution sets and importing them as events."""
