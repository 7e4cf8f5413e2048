"""``out=`` on band and band_from_logp: written in place like a ufunc's, the
same numbers as without it, any layout, and every misuse a clear error."""

import numpy as np
import pytest

import bandsolve as bs

NAMES = ["kl", "tv", "chi2", "js", "alpha:0.5"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [1, 7, 40_000])  # 40,000: the warm-started batch path
def test_out_is_written_in_place_with_the_same_numbers(name, n):
    p = np.geomspace(1e-9, 1 - 1e-9, n)
    expected = bs.band(p, 0.05, name, max_ratio=10.0)
    out = (np.full(n, np.nan), np.full(n, -7.0))  # garbage: every element is written
    result = bs.band(p, 0.05, name, max_ratio=10.0, out=out)
    assert result[0] is out[0] and result[1] is out[1]
    np.testing.assert_array_equal(out[0], expected[0])
    np.testing.assert_array_equal(out[1], expected[1])
    logp = np.log(p)
    got = bs.band_from_logp(logp, 0.05, name, out=(np.empty(n), np.empty(n)))
    np.testing.assert_array_equal(got[1], bs.band_from_logp(logp, 0.05, name)[1])


def test_out_with_broadcasting_and_odd_layouts():
    p = np.linspace(0.01, 0.99, 12).reshape(3, 4)
    delta = np.array([[0.01], [0.1], [1.0]])
    expected = bs.band(p, delta, "kl")
    fortran = (np.empty((3, 4), order="F"), np.empty((3, 4), order="F"))
    bs.band(p, delta, "kl", out=fortran)
    np.testing.assert_array_equal(fortran[0], expected[0])
    strided = np.empty((3, 8))[:, ::2], np.empty((3, 8))[:, 1::2]  # one buffer, interleaved
    bs.band(p, delta, "kl", out=strided)
    np.testing.assert_array_equal(strided[1], expected[1])
    zero_d = (np.empty(()), np.empty(()))
    bs.band(0.3, 0.05, "tv", out=zero_d)
    assert zero_d[0] == pytest.approx(1 - 0.05 / 0.3) and zero_d[1] == pytest.approx(1 + 0.05 / 0.3)


def test_out_list_is_accepted_and_empty_arrays_work():
    lo, hi = np.empty(0), np.empty(0)
    assert bs.band(np.empty(0), 0.05, out=[lo, hi])[0] is lo


@pytest.mark.parametrize("make_out, exc, match", [
    (lambda p: np.empty(4), TypeError, "pair"),
    (lambda p: (np.empty(4),), TypeError, "pair"),
    (lambda p: (np.empty(4, np.float32), np.empty(4)), TypeError, r"out\[0\].*float64"),
    (lambda p: (np.empty(4), [0.0] * 4), TypeError, r"out\[1\].*numpy array"),
    (lambda p: (np.empty(3), np.empty(4)), ValueError, r"out\[0\].*shape \(4,\)"),
    (lambda p: (np.empty(4), np.empty((4, 1))), ValueError, r"out\[1\].*shape"),
    (lambda p: (np.empty(4), _readonly(np.empty(4))), ValueError, "read-only"),
    (lambda p: (p, np.empty(4)), ValueError, "shares memory with the input p"),
    (lambda p: (np.empty(4), p[::-1]), ValueError, "shares memory with the input p"),
    (lambda p: _same(), ValueError, r"out\[1\] \(upper\) shares memory with out\[0\]"),
    (lambda p: (np.lib.stride_tricks.as_strided(np.empty(1), (4,), (0,)), np.empty(4)),
     ValueError, "share memory"),
])
def test_bad_out_raises(make_out, exc, match):
    p = np.array([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(exc, match=match):
        bs.band(p, 0.05, "kl", out=make_out(p))


def test_out_overlapping_delta_raises():
    buffer = np.full(4, 0.05)
    with pytest.raises(ValueError, match="shares memory with the input delta"):
        bs.band(np.array([0.1, 0.2, 0.3, 0.4]), buffer, "kl", out=(buffer, np.empty(4)))


def _readonly(a):
    a.setflags(write=False)
    return a


def _same():
    a = np.empty(4)
    return a, a


def test_unaligned_out_and_input():
    def unaligned(values):
        a = np.ndarray(len(values), dtype=np.float64, buffer=bytearray(8 * len(values) + 1),
                       offset=1)
        a[:] = values
        return a

    p = unaligned([0.1, 0.2, 0.3, 0.4, 0.5])
    assert not p.flags.aligned
    lower = unaligned([np.nan] * 5)
    expected = bs.band(np.array(p), 0.05, "kl")
    bs.band(p, 0.05, "kl", out=(lower, np.empty(5)))
    np.testing.assert_array_equal(lower, expected[0])


def test_out_that_overlaps_itself_is_rejected_and_exotic_disjoint_layouts_are_filled():
    """as_strided can map two elements of one out array to the same bytes,
    with no stride of 0; such an array cannot hold two bounds and is refused.
    A layout whose strides interleave without sharing bytes is filled."""
    from numpy.lib.stride_tricks import as_strided

    p = np.random.default_rng(0).uniform(0.0, 1.0, (6, 7))
    expected = bs.band(p, 0.05, "tv")
    buffer = np.empty(50)
    overlapping = as_strided(buffer, shape=(6, 7), strides=(48, 8), writeable=True)
    with pytest.raises(ValueError, match="share memory"):
        bs.band(p, 0.05, "tv", out=(overlapping, np.empty((6, 7))))
    half_overlapping = as_strided(np.empty(100), shape=(6,), strides=(4,), writeable=True)
    with pytest.raises(ValueError, match="share memory"):
        bs.band(p[0, :6], 0.05, "tv", out=(np.empty(6), half_overlapping))
    interleaved = as_strided(np.empty(8), shape=(2, 2), strides=(16, 24), writeable=True)
    q = p[:2, :2]
    lower, _ = bs.band(q, 0.05, "kl", out=(interleaved, np.empty((2, 2))))
    np.testing.assert_array_equal(lower, bs.band(q, 0.05, "kl")[0])
    for out in ((np.empty((7, 6)).T, np.empty((6, 7))), (np.empty((6, 14))[:, ::2],
                                                         np.empty((6, 7)))):
        lower, upper = bs.band(p, 0.05, "tv", out=out)
        np.testing.assert_array_equal(lower, expected[0])
        np.testing.assert_array_equal(upper, expected[1])


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix itself
def test_out_of_an_ndarray_subclass_is_filled():
    """np.matrix out buffers (an ndarray subclass whose reshape stays 2-D)
    are written in place, as numpy's own ufuncs do with out=."""
    p = np.random.default_rng(1).uniform(0.0, 1.0, (6, 7))
    out = (np.matrix(np.empty((6, 7))), np.matrix(np.empty((6, 7))))
    for divergence in ("tv", "kl"):
        lower, upper = bs.band(p, 0.05, divergence, out=out)
        assert lower is out[0] and upper is out[1]
        expected = bs.band(p, 0.05, divergence)
        np.testing.assert_array_equal(np.asarray(lower), expected[0])
        np.testing.assert_array_equal(np.asarray(upper), expected[1])


def test_out_beyond_the_exact_check_limit_is_refused_as_undecided(monkeypatch):
    """numpy and torch checked out= apart, with limits of 1 << 24 and 1 << 22
    elements, and past them called a valid interleaved layout one that
    shares memory. One check now (_validate.check_out), one limit, and past
    it a message that says the check could not decide."""
    from bandsolve import _validate

    p = np.random.default_rng(2).uniform(0.0, 1.0, 10)
    buffer = np.empty(20)
    expected = bs.band(p, 0.05, "kl")
    lower, upper = bs.band(p, 0.05, "kl", out=(buffer[::2], buffer[1::2]))
    np.testing.assert_array_equal(upper, expected[1])
    monkeypatch.setattr(_validate, "EXACT_OVERLAP_LIMIT", 12)
    with pytest.raises(ValueError, match="cannot check that out.*EXACT_OVERLAP_LIMIT"):
        bs.band(p, 0.05, "kl", out=(buffer[::2], buffer[1::2]))
    # a self-overlap test past the limit is undecided too, not 'shares memory'
    from numpy.lib.stride_tricks import as_strided

    odd = as_strided(np.empty(200), shape=(2, 10), strides=(24, 16), writeable=True)
    with pytest.raises(ValueError, match="cannot check that out\\[0\\]"):
        bs.band(np.full((2, 10), 0.3), 0.05, "kl", out=(odd, np.empty((2, 10))))
    # contiguous buffers are cleared from their spans at any size
    bs.band(p, 0.05, "kl", out=(np.empty(10), np.empty(10)))
