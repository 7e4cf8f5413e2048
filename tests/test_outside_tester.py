"""Regression tests for what an outside tester found in a fresh venv with the
wheel (issue 19's hostile pass), each named after the break it catches."""

import numpy as np
import pytest

import bandsolve as bs
from bandsolve import table


@pytest.mark.parametrize("name", ["alpha:1e200", "alpha:1e13", "alpha:-1e20"])
def test_alpha_parameter_beyond_the_verified_range_is_refused_up_front(name):
    """alpha:1e200 was parsed, then the root finder "did not converge" with a
    message about user generators; alpha:1e20 raised "+inf next to the bound"."""
    with pytest.raises(ValueError, match=r"\|a\| <= 1e\+12"):
        bs.band(0.5, 0.05, name)


def test_alpha_parameter_at_the_edge_of_the_range_is_accepted():
    lower, upper = bs.band(np.array([1e-6, 0.5]), 0.05, "alpha:1e12")
    assert np.all((0 <= lower) & (lower <= 1) & (1 <= upper))


@pytest.mark.parametrize("logp", [np.nan, 0.5, np.inf])
def test_table_evaluate_numpy_refuses_invalid_logp_instead_of_nan(logp):
    """evaluate_numpy raised IndexError (index -2^63) for NaN, 0.5 and +inf;
    then it returned NaN bounds. It refuses them as band_from_logp does."""
    built = table.build("kl", 0.05)
    with pytest.raises(ValueError, match="logp"):
        table.evaluate_numpy(built, np.array([logp]))
