"""forecast-env."""
