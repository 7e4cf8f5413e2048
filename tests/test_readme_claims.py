"""Each promise the README and the documentation make, tested under a name
that says which one.

Where they show code or output, the test reads it from README.md and docs/
themselves, so the text and the behaviour cannot drift apart.
"""

import math
import pathlib
import re

import numpy as np
import pytest
import reference as ref

import bandsolve as bs
from bandsolve.cli import main as cli_main
from bandsolve.divergences import SAMPLE_NAMES

ROOT = pathlib.Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
#: the README and every documentation page, by path
PAGES = {"README.md": README, **{str(p.relative_to(ROOT)): p.read_text()
                                 for p in sorted((ROOT / "docs").rglob("*.md"))}}


def _readme_block(marker: str) -> str:
    """The fenced code block of the README or the docs that contains ``marker``."""
    text = "\n".join(PAGES.values())
    for block in re.findall(r"```(?:\w+)?\n(.*?)```", text, flags=re.S):
        if marker in block:
            return block
    raise AssertionError(f"no README code block contains {marker!r}")


def test_claim_worked_example_output_is_what_the_cli_prints(capsys):
    block = _readme_block("$ bandsolve bounds")
    command, *expected = block.strip().splitlines()
    argv = command.removeprefix("$ bandsolve ").split()
    assert cli_main(argv) == 0
    assert capsys.readouterr().out.strip().splitlines() == expected


def test_claim_user_divergence_example_runs_as_written_on_a_large_batch():
    block = _readme_block("Divergence.from_generator")
    namespace = {"math": math, "bandsolve": bs, "np": np}
    exec(block, namespace)  # the README's own lines, verbatim
    mine = namespace["mine"]
    logp = -np.geomspace(1e-8, 30, 100_000)
    lower, upper = bs.band_from_logp(logp, 0.05, mine)
    for i in (0, 58_675, 99_999):  # 58,675 raised BandSolveError before
        for side, value in (("lower", lower[i]), ("upper", upper[i])):
            truth = float(ref.bound("kl", float(logp[i]), 0.05, side, from_logp=True)[0])
            # the README's user-generator accuracy: 1e-9 of min(r, |r - 1|), 4 eps absolute
            assert abs(value - truth) <= max(1e-9 * min(truth, abs(truth - 1)),
                                             4 * ref.EPS * max(truth, 1.0))


@pytest.mark.parametrize("name", [*SAMPLE_NAMES, "alpha:3"])
def test_claim_results_lie_in_zero_one_and_one_over_p(name):
    p = np.r_[0.0, np.geomspace(1e-300, 1, 400), 1 - np.geomspace(1e-16, 0.5, 100)]
    for delta in (1e-8, 0.05, 10.0):
        lower, upper = bs.band(p, delta, name)
        assert lower.dtype == upper.dtype == np.float64
        assert np.all((0 <= lower) & (lower <= 1) & (1 <= upper))
        inner = p > 0
        assert np.all(upper[inner] <= 1 / p[inner])


def test_claim_p_zero_gives_zero_and_inf_or_max_ratio():
    assert tuple(map(float, bs.band(0.0, 0.05))) == (0.0, math.inf)
    assert tuple(map(float, bs.band(0.0, 0.05, max_ratio=10))) == (0.0, 10.0)
    assert tuple(map(float, bs.band_from_logp(-math.inf, 0.05, "tv"))) == (0.0, math.inf)


def test_claim_saturation_is_exact():
    # rkl: the upper bound saturates iff -log p <= delta (exact 1/p, not a rounding)
    lower, upper = bs.band(0.5, 0.8, "rkl")
    assert float(upper) == 2.0
    # tv: lower saturates where delta >= p
    assert float(bs.band(0.3, 0.3, "tv")[0]) == 0.0


def test_claim_scalars_give_zero_dimensional_arrays():
    lower, upper = bs.band(0.3, 0.05)
    assert isinstance(lower, np.ndarray) and lower.shape == ()


@pytest.mark.parametrize("bad, message", [
    (np.array([0.5, np.nan, np.nan]), "2 of 3 elements, the first at index (1,)"),
    (np.array([0.5, 1.5]), "must lie in [0, 1]"),
    (np.array([[0.5, -0.1]]), "the first at index (0, 1)"),
    (np.array([np.inf]), "contains inf"),
])
def test_claim_bad_input_names_the_count_and_first_index(bad, message):
    with pytest.raises(ValueError) as exc:
        bs.band(bad, 0.05)
    assert message in str(exc.value)


@pytest.mark.parametrize("delta", [0.0, -1.0, np.nan, np.inf])
def test_claim_bad_delta_raises(delta):
    with pytest.raises(ValueError, match="delta"):
        bs.band(0.5, delta)


@pytest.mark.parametrize("bad", [True, 1 + 2j, "0.5", [None]])
def test_claim_non_real_input_raises_type_error(bad):
    with pytest.raises(TypeError):
        bs.band(bad, 0.05)


def test_claim_log_p_above_zero_raises():
    with pytest.raises(ValueError, match="must be <= 0"):
        bs.band_from_logp(np.array([-0.1, 1e-300]), 0.05)


def test_claim_unknown_divergence_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="known: chi2"):
        bs.band(0.5, 0.05, "kll")
    with pytest.raises(ValueError, match="needs its parameter"):
        bs.band(0.5, 0.05, "alpha")


def test_claim_the_readme_links_nothing_outside_the_repository():
    for target in re.findall(r"\]\(([^)#]+)", README):
        assert not target.startswith(("http", "..", "/")), target
        assert (ROOT / target).exists(), target
    assert "shared/" not in README


def test_claim_the_docs_link_nothing_outside_the_repository():
    """Pages link pages (mkdocs build --strict checks those in CI) or the
    figures the build publishes; nothing on the web, nothing above docs/."""
    for path, text in PAGES.items():
        if path == "README.md":
            continue
        page = ROOT / path
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            assert not target.startswith(("http", "/")), (path, target)
            if target.startswith("figures/") or target.startswith("../figures/"):
                assert (ROOT / "figures" / pathlib.Path(target).name).exists(), (path, target)
            else:
                assert (page.parent / target).resolve().exists(), (path, target)
        assert "shared/" not in text and "MATH.md" not in text, path


def test_claim_torch_returns_float32_for_half_input_and_no_gradient():
    torch = pytest.importorskip("torch")
    import bandsolve.torch as bt

    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        x = torch.log(torch.tensor([0.08, 0.5, 1.0], dtype=dtype)).requires_grad_()
        lower, upper = bt.band_from_logp(x, 0.05)
        assert lower.dtype == torch.float32 and not lower.requires_grad


def test_claim_torch_validate_false_gives_nan_never_a_number():
    torch = pytest.importorskip("torch")
    import bandsolve.torch as bt

    x = torch.tensor([float("nan"), 0.5, float("inf")], dtype=torch.float32)
    lower, upper = bt.band_from_logp(x, 0.05, validate=False)
    assert torch.isnan(lower[[0, 2]]).all() and torch.isnan(upper[[0, 2]]).all()
    with pytest.raises(ValueError):
        bt.band_from_logp(x, 0.05)
