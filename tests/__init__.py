"""The test suite; it mirrors the code folders. Shared test code lives in tests/support/."""
