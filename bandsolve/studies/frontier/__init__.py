"""Reward-entropy frontiers: each clipping rule over its own hyperparameter."""
