"""Code the tests (and benchmarks) share: sample data builders, local servers, reference implementations."""
