"""The tail-token bandit under SGD: does fixed clipping freeze the tail?"""
