"""Regression tests for issue 19's leftovers and its second hostile pass,
each named after the break it catches, checked against mpmath or a closed
form (never against bandsolve itself)."""

import math

import mpmath as mp
import numpy as np
import pytest

import bandsolve as bs

BUILT_IN = ("kl", "rkl", "tv", "chi2", "neyman_chi2", "hellinger", "js", "alpha:0.5",
            "alpha:2", "alpha:-1")
# log p where 1/fl(exp(log p)) rounds above e^(-log p) (found by search), over
# every scale, and the band where exp(log p) is subnormal
OVERSHOOTING_LOGP = np.array([-1.5306325389161855e-05, -37.54598973202707,
                              -0.18929267240687142, -708.5, -709.0, -709.7])


def _logp_sample():
    rng = np.random.default_rng(19)
    return np.concatenate([OVERSHOOTING_LOGP, -np.exp(rng.uniform(-30, 6.5, 400)),
                           -rng.uniform(708.4, 709.78, 40)])


@pytest.mark.parametrize("name", BUILT_IN + ("user_hellinger",))
def test_saturated_upper_from_logp_never_exceeds_the_simplex_cap(name):
    """The saturated upper bound from log p was 1/fl(exp(log p)): one ulp
    above e^(-log p) for about one log p in eight (and more where exp(log p)
    is subnormal), so p * upper > 1. It is now at most e^(-log p), within
    the accuracy tolerance of it."""
    div = bs.Divergence.from_generator("user_hellinger", lambda u: (math.sqrt(u) - 1.0) ** 2) \
        if name == "user_hellinger" else name
    logp = _logp_sample()
    _, upper = bs.band_from_logp(logp, np.finfo(np.float64).max, div)
    mp.mp.dps = 40
    for x, u in zip(logp, upper):
        cap = mp.exp(-mp.mpf(float(x)))
        assert mp.mpf(float(u)) <= cap, (name, x, u)
        assert mp.mpf(float(u)) >= cap * (1 - 4 * mp.mpf(2) ** -52), (name, x, u)


def test_interior_upper_from_logp_never_exceeds_the_simplex_cap():
    """Close to saturation, the interior bound min(1 + m/p, 1/p) took the
    same over-rounded cap."""
    logp = _logp_sample()
    mp.mp.dps = 40
    for delta in (0.5, 5.0, 50.0):
        _, upper = bs.band_from_logp(logp, delta, "rkl")
        for x, u in zip(logp, upper):
            assert mp.mpf(float(u)) <= mp.exp(-mp.mpf(float(x))), (delta, x, u)
