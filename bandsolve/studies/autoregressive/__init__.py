"""The autoregressive study under Adam: the tabular autoregressive task."""
