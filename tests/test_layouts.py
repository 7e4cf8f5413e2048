"""Unusual memory layouts and dtypes give the same bounds as a plain array.

Read-only, big-endian, non-contiguous, Fortran-ordered, 0-d, empty, float32
and integer inputs, for p and log p and for delta, through every kind of
kernel (closed form, root finder, the large-batch warm start). The values
themselves are checked against mpmath in test_accuracy and test_matrix; here
the promise is that the layout never changes them, nor the shape.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bandsolve as bs

LAYOUTS = ("plain", "read-only", "big-endian", "strided", "fortran", "float32", "reversed")


def _lay_out(values: np.ndarray, layout: str) -> np.ndarray:
    """``values`` (a 2-d float64 array) in the given layout, same numbers."""
    if layout == "plain":
        return values.copy()
    if layout == "read-only":
        out = values.copy()
        out.setflags(write=False)
        return out
    if layout == "big-endian":
        return values.astype(">f8")
    if layout == "strided":
        wide = np.zeros((values.shape[0], 2 * values.shape[1]))
        wide[:, ::2] = values
        return wide[:, ::2]
    if layout == "fortran":
        return np.asfortranarray(values)
    if layout == "float32":  # exact only for values float32 holds: see the caller
        return values.astype(np.float32)
    if layout == "reversed":
        return values[::-1, ::-1].copy()[::-1, ::-1]
    raise AssertionError(layout)


_DIVERGENCES = ("kl", "tv", "hellinger", "alpha:0.5", "js")


@settings(max_examples=40, deadline=None)
@given(p=hnp.arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 9)),
                    elements=st.one_of(st.floats(0.0, 1.0), st.sampled_from(
                        [0.0, 1.0, 5e-324, 1e-300, 1 - 2.0**-53, 0.5]))),
       layout=st.sampled_from(LAYOUTS), divergence=st.sampled_from(_DIVERGENCES),
       from_logp=st.booleans())
def test_layout_never_changes_the_bounds(p, layout, divergence, from_logp):
    x = np.log(p, where=p > 0, out=np.full_like(p, -math.inf)) if from_logp else p
    if layout == "float32":
        x = x.astype(np.float32).astype(np.float64)  # numbers float32 can hold
    fn = bs.band_from_logp if from_logp else bs.band
    expected = fn(np.ascontiguousarray(x), 0.05, divergence)
    got = fn(_lay_out(x, layout), 0.05, divergence)
    for g, e in zip(got, expected):
        assert g.shape == x.shape and g.dtype == np.float64
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("divergence", ["kl", "chi2", "rkl"])
def test_layout_of_a_large_batch_and_of_delta(layout, divergence):
    """The warm-start path (40,000 elements, one delta) and a delta array
    in the same layout as p."""
    rng = np.random.default_rng(3)
    p = rng.uniform(0.0, 1.0, (200, 200))
    if layout == "float32":
        p = p.astype(np.float32).astype(np.float64)
    expected = bs.band(p, 0.05, divergence)
    got = bs.band(_lay_out(p, layout), 0.05, divergence)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    delta = rng.uniform(0.01, 0.1, (200, 200))
    expected = bs.band(p, delta, divergence)
    got = bs.band(_lay_out(p, layout), _lay_out(delta, "plain" if layout == "float32"
                                                else layout), divergence)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("divergence", ["kl", "tv"])
def test_zero_dimensional_and_empty_inputs(divergence):
    lower, upper = bs.band(np.float64(0.3), 0.05, divergence)
    assert lower.shape == () and upper.shape == ()
    assert (lower, upper) == tuple(float(v[0]) for v in bs.band([0.3], 0.05, divergence))
    for shape in [(0,), (3, 0), (0, 4, 2)]:
        lower, upper = bs.band(np.empty(shape), 0.05, divergence)
        assert lower.shape == shape and upper.shape == shape
        lower, upper = bs.band_from_logp(np.empty(shape), np.full(shape[-1:], 0.05), divergence)
        assert lower.shape == shape
    assert bs.binary_divergence(np.empty((2, 0)), 1.0).shape == (2, 0)


def test_integer_and_broadcast_inputs():
    lower, upper = bs.band(np.array([0, 1]), np.array([[0.05], [0.5]]))
    assert lower.shape == (2, 2)
    np.testing.assert_array_equal(lower[:, 0], 0.0)  # p = 0
    np.testing.assert_array_equal(upper[:, 0], math.inf)
    np.testing.assert_allclose(lower[:, 1], np.exp(-np.array([0.05, 0.5])), rtol=1e-15)


def test_regression_read_only_input_is_accepted(tmp_path, readme_kl):
    """numba rejected read-only arrays (memory maps, np.frombuffer, shared
    memory) with a TypeError from inside the validation scan."""
    p = np.array([0.1, 0.5])
    p.setflags(write=False)
    lower, upper = bs.band(p, 0.05)
    expected = bs.band(np.array([0.1, 0.5]), 0.05)
    np.testing.assert_array_equal(lower, expected[0])
    np.testing.assert_array_equal(upper, expected[1])

    path = tmp_path / "logp.npy"
    np.save(path, np.log(np.linspace(0.01, 1.0, 50_000)))
    mapped = np.load(path, mmap_mode="r")
    delta = np.frombuffer(np.full(50_000, 0.05).tobytes())  # read-only too
    for div in ("kl", "tv", readme_kl):
        lower, upper = bs.band_from_logp(mapped, delta, div)
        ref_lower, ref_upper = bs.band_from_logp(np.array(mapped), np.array(delta), div)
        np.testing.assert_array_equal(lower, ref_lower)
        np.testing.assert_array_equal(upper, ref_upper)
    r = np.frombuffer(np.array([0.5, 1.0, 2.0]).tobytes())
    assert np.isfinite(bs.binary_divergence(np.frombuffer(np.array([0.3] * 3).tobytes()), r)).all()
