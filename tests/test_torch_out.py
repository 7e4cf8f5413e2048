"""``out=`` on bandsolve.torch.band / band_from_logp, mirroring the numpy API."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import bandsolve as bs  # noqa: E402
import bandsolve.torch as bt  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_out_receives_the_same_bounds(dtype):
    logp = torch.log(torch.linspace(1e-6, 1.0, 1000, dtype=torch.float64)).to(dtype)
    expected = bt.band_from_logp(logp, 0.05, "kl", max_ratio=10.0)
    out = (torch.full_like(expected[0], float("nan")), torch.empty_like(expected[1]))
    got = bt.band_from_logp(logp, 0.05, "kl", max_ratio=10.0, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    assert torch.equal(out[0], expected[0]) and torch.equal(out[1], expected[1])
    p = logp.exp()
    bt.band(p, 0.05, "tv", out=out)
    lo, hi = bs.band(p.double().numpy(), 0.05, "tv")
    np.testing.assert_allclose(out[1].double().numpy(), hi, rtol=1e-5)


@pytest.mark.parametrize("make_out, exc, match", [
    (lambda x: torch.empty(4), TypeError, "pair"),
    (lambda x: (torch.empty(4, dtype=torch.float64), torch.empty(4)), TypeError,
     r"out\[0\].*torch.float32"),
    (lambda x: (torch.empty(4), np.empty(4)), TypeError, r"out\[1\].*tensor"),
    (lambda x: (torch.empty(3), torch.empty(4)), ValueError, "shape"),
    (lambda x: (x, torch.empty(4)), ValueError, "shares memory with the input logp"),
    (lambda x: _same(), ValueError, r"out\[1\] \(upper\) shares memory with out\[0\]"),
])
def test_bad_out_raises(make_out, exc, match):
    x = torch.log(torch.tensor([0.1, 0.2, 0.3, 0.4]))
    with pytest.raises(exc, match=match):
        bt.band_from_logp(x, 0.05, "kl", out=make_out(x))


def _same():
    buffer = torch.empty(8)
    return buffer[:4], buffer[2:6]


def test_disjoint_views_of_one_buffer_are_accepted():
    buffer = torch.empty(12)
    x = buffer[:4]
    x.copy_(torch.log(torch.tensor([0.1, 0.2, 0.3, 0.4])))
    lower, upper = buffer[4:8], buffer[8:]
    bt.band_from_logp(x, 0.05, "kl", out=(lower, upper))
    assert torch.equal(upper, bt.band_from_logp(x, 0.05, "kl")[1])


def test_interleaved_views_are_accepted_and_overlapping_ones_refused():
    x = torch.rand(100, dtype=torch.float64)
    buffer = torch.empty(200, dtype=torch.float64)
    lower, upper = bt.band(x, 0.05, "tv", out=(buffer[::2], buffer[1::2]))
    assert torch.equal(upper, bt.band(x, 0.05, "tv")[1])
    with pytest.raises(ValueError, match="shares memory"):
        bt.band(x, 0.05, "tv", out=(buffer[:100], buffer[99:199]))


@pytest.mark.parametrize("make, match", [
    (lambda: torch.empty(1).expand(4), "share memory"),
    (lambda: torch.empty(4, requires_grad=True), "requires grad"),
])
def test_out_misuse_is_named(make, match):
    x = torch.log(torch.tensor([0.1, 0.2, 0.3, 0.4]))
    with pytest.raises(ValueError, match=match):
        bt.band_from_logp(x, 0.05, "kl", out=(make(), torch.empty(4)))


def test_out_beyond_the_exact_check_limit_is_refused_as_undecided(monkeypatch):
    """The numpy API's limit and message (one check, in bandsolve._validate)."""
    from bandsolve import _validate

    x = torch.rand(10, dtype=torch.float64)
    buffer = torch.empty(20, dtype=torch.float64)
    bt.band(x, 0.05, "tv", out=(buffer[::2], buffer[1::2]))
    monkeypatch.setattr(_validate, "EXACT_OVERLAP_LIMIT", 12)
    with pytest.raises(ValueError, match="cannot check that out.*EXACT_OVERLAP_LIMIT"):
        bt.band(x, 0.05, "tv", out=(buffer[::2], buffer[1::2]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_out_traces_under_torch_compile_fullgraph(dtype):
    """Regression: out= under torch.compile(fullgraph=True) failed inside the
    overlap check (a traced tensor has no address), as dynamo's opaque
    'Observed exception'. It now traces; the bounds written are the eager
    call's, for an out= apart from the input and for one that aliases it."""
    torch._dynamo.reset()
    p = torch.tensor([0.0, 1e-6, 0.3, 0.5, 0.9, 1.0], dtype=dtype)
    expected = bt.band(p, 0.05, "tv")
    f = torch.compile(lambda x, a, b: bt.band(x, 0.05, "tv", out=(a, b)), fullgraph=True)
    out = (torch.empty_like(expected[0]), torch.empty_like(expected[1]))
    got = f(p, *out)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    assert torch.equal(out[0], expected[0]) and torch.equal(out[1], expected[1])
    x = p.clone()  # the lower bound written over the input it is computed from
    f(x, x, torch.empty_like(x))
    assert torch.equal(x, expected[0])
    torch._dynamo.reset()
