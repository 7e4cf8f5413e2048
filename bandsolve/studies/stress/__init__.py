"""The high-off-policy stress test: the tail-token bandit with many updates per batch."""
