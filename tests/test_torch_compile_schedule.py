"""torch.compile(fullgraph=True) as a trainer uses it (issue 19, items 1-2): a
schedule of deltas, and inputs of any layout."""

import pytest

torch = pytest.importorskip("torch")

import bandsolve.torch as bt  # noqa: E402
from bandsolve.torch import Band, PolicyLossConfig, policy_loss  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_band_from_logp_follows_a_delta_schedule_without_crashing(dtype):
    # the second distinct delta raised "assume_constant_result argument
    # conversion failed": dynamo had generalised delta to a symbolic float
    x = -torch.rand(6, 5, dtype=dtype) * 6
    compiled = torch.compile(lambda lp, d: bt.band_from_logp(lp, d), fullgraph=True)
    for delta in (0.05, 0.2, 0.1, 0.3, 0.05):
        lower, upper = compiled(x, delta)
        eager = bt.band_from_logp(x, delta)
        assert torch.equal(lower, eager[0]) and torch.equal(upper, eager[1]), delta


def test_compiled_policy_loss_with_a_new_band_each_step():
    torch.manual_seed(0)
    old = -torch.rand(4, 6) * 4
    new = (old + 0.3 * torch.randn(4, 6)).requires_grad_()
    adv, mask = torch.randn(4, 6), torch.ones(4, 6)
    step = torch.compile(lambda n, o, a, m, d: policy_loss(n, o, a, m, PolicyLossConfig(
        rule=Band(delta=d)))[0], fullgraph=True)
    for delta in (0.02, 0.05, 0.08):
        expected, _ = policy_loss(new, old, adv, mask, PolicyLossConfig(rule=Band(delta=delta)))
        got = step(new, old, adv, mask, delta).detach()
        assert float(got) == pytest.approx(float(expected.detach()), rel=1e-6)


def test_compiled_band_checks_a_bad_delta_when_it_runs():
    x = -torch.rand(3, 3)
    compiled = torch.compile(lambda lp, d: bt.band_from_logp(lp, d), fullgraph=True)
    compiled(x, 0.05)
    compiled(x, 0.1)
    with pytest.raises(Exception, match="delta must be positive"):
        compiled(x, -0.1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_band_from_logp_on_a_transposed_tensor(dtype):
    # the fake kernel kept the input's strides; the op returns contiguous
    # tensors, and compiled code failed "expected size 8==8, stride 4==1"
    x = -torch.rand(8, 4, dtype=dtype) * 5
    compiled = torch.compile(lambda lp: bt.band_from_logp(lp, 0.05), fullgraph=True)
    lower, upper = compiled(x.t())
    eager = bt.band_from_logp(x.t(), 0.05)
    assert torch.equal(lower, eager[0]) and torch.equal(upper, eager[1])
