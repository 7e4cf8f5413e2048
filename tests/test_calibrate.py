"""bandsolve.calibrate_delta and `bandsolve calibrate`: closed forms for the
width target (tv and chi2 give delta explicitly), the defining equations
recomputed independently on random samples, monotonicity, and errors."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bandsolve as bs
from bandsolve.calibrate import DELTA_RANGE, calibrate_delta
from bandsolve.cli import main
from bandsolve.divergences import BUILTIN_NAMES


@settings(max_examples=40, deadline=None)
@given(p=st.floats(0.01, 0.8), eps_low=st.floats(0.01, 0.5), eps_high=st.floats(0.01, 0.5))
def test_width_target_matches_the_closed_forms(p, eps_low, eps_high):
    """tv: |r - 1| = delta / p, so the width 2 delta / p; chi2: |r - 1| =
    sqrt(delta (1 - p) / p). Both symmetric while unsaturated."""
    if 1 + eps_high >= 1 / p:  # the clip's upper bound would be 1/p
        return
    half = (eps_low + eps_high) / 2
    tv = calibrate_delta("tv", clip=eps_low, clip_high=eps_high, at_p=p)
    if half * p <= min(p, 1 - p):  # unsaturated at the match
        assert tv.delta == pytest.approx(half * p, rel=1e-10)
    chi2 = calibrate_delta("chi2", clip=eps_low, clip_high=eps_high, at_p=p)
    if 1 + half <= 1 / p:
        assert chi2.delta == pytest.approx(half**2 * p / (1 - p), rel=1e-10)


@pytest.mark.parametrize("name", ["kl", "rkl", "js", "hellinger", "alpha:0.5", "alpha:-1"])
def test_width_target_solves_its_equation(name):
    c = calibrate_delta(name, clip=0.2, clip_high=0.28, at_p=0.3)
    lo, hi = bs.band(0.3, c.delta, name)
    assert float(hi - lo) == pytest.approx(0.48, rel=1e-10)
    assert c.goal == pytest.approx(0.48) and c.target == "width"


def _sample(seed, n=2000):
    rng = np.random.default_rng(seed)
    return np.log(rng.beta(0.3, 0.3, n).clip(1e-12, 1.0)), rng


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), name=st.sampled_from(["kl", "rkl", "tv", "chi2", "js"]),
       eps=st.floats(0.05, 0.4))
def test_mean_change_target_on_random_samples(seed, name, eps):
    logp, _ = _sample(seed)
    c = calibrate_delta(name, clip=eps, logp=logp)
    p = np.exp(logp)
    clip_change = np.mean(p * (np.minimum(1 + eps, 1 / p) - (1 - eps)))
    lo, hi = bs.band(p, c.delta, name)
    assert np.mean(p * (hi - lo)) == pytest.approx(clip_change, rel=1e-9)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), name=st.sampled_from(["rkl", "tv", "hellinger", "js"]))
def test_mean_divergence_target_on_random_samples(seed, name):
    """For divergences whose clip costs are finite: the mean of g at the
    band's bounds (delta, or g at the end where saturated) equals the mean
    of g at the clip's bounds."""
    logp, _ = _sample(seed)
    c = calibrate_delta(name, logp=logp, target="mean_divergence")
    p = np.exp(logp)
    # at p >= 1/1.2 the clip's upper bound is the simplex end; 1 ulp above
    # the float 1/p is read as the end exactly
    end = np.nextafter(1 / p, 2 / p)
    clip_costs = [bs.binary_divergence(p, 0.8, name),
                  bs.binary_divergence(p, np.where(1.2 * p >= 1, end, 1.2), name)]
    lo, hi = bs.band(p, c.delta, name)
    band_costs = [np.where(lo == 0, bs.binary_divergence(p, 0.0, name), c.delta),
                  np.where(hi == 1 / p, bs.binary_divergence(p, end, name), c.delta)]
    assert c.excluded == 0
    assert np.mean(band_costs) == pytest.approx(np.mean(clip_costs), rel=1e-9)


def test_mean_divergence_leaves_out_infinite_clip_costs():
    """kl's upper side costs infinity once 1.2 >= 1/p (p >= 5/6)."""
    p = np.array([0.1, 0.5, 0.9, 0.95])
    c = calibrate_delta("kl", logp=np.log(p), target="mean_divergence")
    assert c.excluded == 2
    finite = [bs.binary_divergence(p, 0.8, "kl"), bs.binary_divergence(p[:2], 1.2, "kl")]
    assert c.goal == pytest.approx(sum(f.sum() for f in finite) / 6, rel=1e-12)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), name=st.sampled_from(["kl", "tv", "chi2"]),
       wanted=st.one_of(st.none(), st.floats(0.01, 0.5), st.sampled_from([0.375, 0.1, 0.201])))
def test_clip_fraction_target_is_the_smallest_delta_reaching_it(seed, name, wanted):
    logp, rng = _sample(seed, 500)
    new = np.minimum(logp + rng.normal(0, 0.3, logp.size), 0.0)
    c = calibrate_delta(name, logp=logp, new_logp=new, clip_fraction=wanted)
    ratio = np.exp(new - logp)
    on = 8 * np.finfo(float).eps  # the documented tolerance: a ratio this close is on the bound

    def outside(lo, hi):
        return np.mean((ratio < lo * (1 - on)) | (ratio > hi * (1 + on)))

    goal = outside(0.8, 1.2) if wanted is None else wanted
    assert c.goal == pytest.approx(goal)

    def share(delta):
        return outside(*bs.band_from_logp(logp, delta, name))

    # the smallest delta whose share is at most the goal (in whole tokens)
    allowed = np.floor(goal * logp.size + 1e-9) / logp.size + 1e-12
    assert share(c.delta) <= allowed
    if c.delta > DELTA_RANGE[0]:
        assert share(c.delta * (1 - 1e-9)) > allowed


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(BUILTIN_NAMES),
       p=st.floats(1e-6, 1 - 1e-6), d1=st.floats(1e-6, 10.0), d2=st.floats(1e-6, 10.0))
def test_band_is_nested_in_delta(name, p, d1, d2):
    """The monotonicity each target relies on: a larger delta, a wider band."""
    small, large = sorted((d1, d2))
    lo1, hi1 = bs.band(p, small, name)
    lo2, hi2 = bs.band(p, large, name)
    assert lo2 <= lo1 and hi1 <= hi2


@pytest.mark.parametrize("name", ["kl", "chi2"])
def test_larger_eps_gives_larger_delta(name):
    logp, _ = _sample(1)
    deltas = [calibrate_delta(name, clip=e, logp=logp).delta for e in (0.1, 0.2, 0.3)]
    assert deltas[0] < deltas[1] < deltas[2]


@pytest.mark.parametrize("kwargs, match", [
    (dict(at_p=0.5, target="nope"), "unknown target"),
    (dict(), "takes logp"),
    (dict(at_p=1.0), r"at_p must lie in \(0, 1\)"),
    (dict(at_p=0.5, clip=0.0), r"clip must lie in \(0, 1\)"),
    (dict(at_p=0.5, clip_high=1.5), r"clip_high must lie in \(0, 1\)"),
    (dict(at_p=0.5, logp=[-1.0]), "takes at_p"),
    (dict(logp=[-1.0, 0.5]), "logp must be <= 0"),
    (dict(logp=[-1.0, np.nan]), "logp contains NaN"),
    (dict(logp=[]), "logp is empty"),
    (dict(logp=[-1.0], new_logp=[-1.0, -2.0]), "shape of logp"),
    (dict(logp=[-1.0], target="clip_fraction"), "takes new_logp"),
    (dict(logp=[-1.0], new_logp=[-1.0], clip_fraction=1.0), r"clip_fraction must lie"),
    (dict(logp=[-1.0], target="mean_change", clip_fraction=0.1), "does not use"),
    (dict(at_p=0.5, divergence="nope"), "unknown divergence"),
])
def test_bad_input_raises_value_error(kwargs, match):
    divergence = kwargs.pop("divergence", "kl")
    with pytest.raises(ValueError, match=match):
        calibrate_delta(divergence, **kwargs)


def test_unreachable_goal_names_the_reachable_range():
    # max_ratio 1.1 caps the band below the ratio 2: some share stays clipped
    with pytest.raises(ValueError, match="out of the band's reach"):
        calibrate_delta("kl", logp=[-1.0, -1.0], new_logp=[-1.0, math.log(2) - 1.0],
                        clip_fraction=0.0, max_ratio=1.1)


def test_table_takes_typed_arguments_and_returns_rows():
    """calibrate.table took an argparse.Namespace (a Python caller had to fake
    a command line) and returned the printed text; now the CLI parses and
    prints, and the library returns one row per divergence."""
    from bandsolve.calibrate import OutOfReach, Unreachable, table

    rows = table(["kl", "tv"], clip=0.2, clip_high=0.28, at_p=0.3)
    assert rows == [calibrate_delta(name, clip=0.2, clip_high=0.28, at_p=0.3)
                    for name in ("kl", "tv")]
    sample = dict(logp=[-1.0, -1.0], new_logp=[-1.0, math.log(2) - 1.0], clip_fraction=0.0,
                  max_ratio=1.1)
    unreachable = table(["kl", "tv"], **sample)
    assert [type(r) for r in unreachable] == [Unreachable, Unreachable]
    assert [r.divergence for r in unreachable] == ["kl", "tv"]
    assert "out of the band's reach" in unreachable[0].reason
    with pytest.raises(OutOfReach):
        calibrate_delta("kl", **sample)
    with pytest.raises(ValueError, match="at_p must lie in"):  # bad input still raises
        table(["kl", "tv"], at_p=1.5)


def test_cli_prints_every_divergence(capsys):
    assert main(["calibrate", "--match-clip", "0.2", "--at-p", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "target width, at p = 0.5" in out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[3:]}
    assert float(rows["tv"]) == pytest.approx(0.1) and float(rows["chi2"]) == pytest.approx(0.04)
    assert set(rows) == set(BUILTIN_NAMES)


def test_cli_reads_samples_and_reports_errors(tmp_path, capsys):
    logp, rng = _sample(2, 300)
    np.save(tmp_path / "old.npy", logp)
    np.savetxt(tmp_path / "new.txt", np.minimum(logp + rng.normal(0, 0.2, 300), 0))
    assert main(["calibrate", "--logp", str(tmp_path / "old.npy"), "--new-logp",
                 str(tmp_path / "new.txt"), "--divergence", "kl", "tv"]) == 0
    out = capsys.readouterr().out
    assert "target clip_fraction, over 300 tokens" in out
    assert main(["calibrate", "--at-p", "1.5"]) == 2
    assert "at_p must lie in (0, 1)" in capsys.readouterr().err
    np.save(tmp_path / "bad.npy", np.array([0.5]))
    assert main(["calibrate", "--logp", str(tmp_path / "bad.npy")]) == 2
    assert "logp must be <= 0" in capsys.readouterr().err


def test_regression_tokens_of_probability_zero_count_zero_change():
    """logp = -inf (p = 0) has the band [0, inf]: 0 * inf gave a NaN mean and
    an 'out of reach' error with the range 'nan to nan'."""
    with_zero = calibrate_delta("kl", logp=[-np.inf, -1.0])
    alone = calibrate_delta("kl", logp=[-1.0])
    p = math.exp(-1.0)
    lo, hi = bs.band(p, with_zero.delta, "kl")
    assert p * (hi - lo) / 2 == pytest.approx(with_zero.goal, rel=1e-9)
    assert with_zero.goal == pytest.approx(alone.goal / 2)
    assert calibrate_delta("tv", logp=[-np.inf, -1.0], target="mean_divergence").excluded == 2


def test_regression_kl_clip_cost_at_the_simplex_end_is_infinite_for_every_p():
    """At p >= 1/1.2 the clip lets the token reach probability 1: kl's cost is
    inf, but g one ulp above the float 1/p was finite for p = exp(log 0.84)
    (5.5), which put it in the mean (goal 22x too large)."""
    c = calibrate_delta("kl", logp=np.log([0.84, 0.9, 0.5]), target="mean_divergence")
    assert c.excluded == 2
    p = np.array([0.84, 0.9, 0.5])
    finite = [bs.binary_divergence(p, 0.8, "kl"), bs.binary_divergence(0.5, 1.2, "kl")]
    assert c.goal == pytest.approx(float(finite[0].sum() + finite[1]) / 4, rel=1e-12)
    rng = np.random.default_rng(0)
    p = rng.uniform(1e-6, 1.0, 1000)
    c = calibrate_delta("kl", logp=np.log(p), target="mean_divergence")
    assert c.excluded == int(np.sum(1.2 * np.exp(np.log(p)) >= 1.0))


def test_regression_a_token_whose_new_probability_is_one_is_on_the_band():
    """exp(new - old) with new = 0 lands an ulp above the band's 1/p: it counted
    as clipped at every delta, so a share of 0 was out of reach."""
    rng = np.random.default_rng(1)
    lp = np.log(rng.uniform(1e-6, 1, 2000))
    new = np.minimum(lp + rng.normal(0, 0.2, 2000), 0.0)
    c = calibrate_delta("kl", logp=lp, new_logp=new, clip_fraction=0.0)
    lo, hi = bs.band_from_logp(lp, c.delta, "kl")
    ratio = np.exp(new - lp)
    on = 8 * np.finfo(float).eps
    assert np.all((ratio >= lo * (1 - on)) & (ratio <= hi * (1 + on)))
    at_end = new == 0.0
    assert at_end.any() and np.all(ratio[at_end] > hi[at_end] * (1 - on))  # on the bound 1/p


def test_regression_shapes_must_match_not_only_sizes():
    lp = np.log(np.linspace(0.01, 0.99, 20))
    with pytest.raises(ValueError, match="shape of logp"):
        calibrate_delta("kl", logp=lp.reshape(4, 5), new_logp=lp)
    with pytest.raises(TypeError, match="at_p must be a single number"):
        calibrate_delta("kl", at_p=np.array([0.5]))
    with pytest.raises(ValueError, match="only -inf"):
        calibrate_delta("kl", logp=[-np.inf, -np.inf])


def test_cli_target_without_logp_names_the_missing_input(capsys):
    assert main(["calibrate", "--target", "mean_change"]) == 2
    assert "takes logp" in capsys.readouterr().err


def test_cli_logp_given_a_number_not_a_file_says_it_wants_a_file(tmp_path, capsys,
                                                                  monkeypatch):
    # `bounds --logp` takes numbers; `calibrate --logp 0.5` once answered "0.5 not found"
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "--match-clip", "0.2", "--logp", "-0.5"]) == 2
    err = capsys.readouterr().err
    assert "--logp -0.5: no such file" in err and "--at-p" in err
    np.save(tmp_path / "old.npy", np.array([-0.5, -2.0]))
    assert main(["calibrate", "--logp", "old.npy", "--new-logp", "missing.txt"]) == 2
    assert "--new-logp missing.txt: no such file" in capsys.readouterr().err


def test_cli_logp_file_that_holds_no_numbers_is_named_without_a_pickle_hint(tmp_path, capsys,
                                                                             monkeypatch):
    """Regression: a .npy of garbage got numpy's advice to load it with
    allow_pickle=True (unsafe, and wrong: it is no pickle), without the file's
    name; a folder got '[Errno 21] Is a directory'. Each now names the option
    and the file and says what is wrong, in one line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.npy").write_bytes(b"not an array")
    (tmp_path / "words.txt").write_text("-0.5\nabc\n")
    (tmp_path / "folder").mkdir()
    for name, says in (("garbage.npy", "no .npy array of numbers"),
                       ("words.txt", "one number per entry"), ("folder", "a folder")):
        assert main(["calibrate", "--match-clip", "0.2", "--logp", name]) == 2
        err = capsys.readouterr().err
        assert f"--logp {name}" in err and says in err and "allow_pickle" not in err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("at_p", ["5e-324", "1e-310"])
def test_regression_cli_at_a_subnormal_p_warns_nothing_and_names_the_width_target(at_p, capsys):
    """`calibrate --at-p 5e-324` printed numpy's 'overflow encountered in
    divide' twice (1/p of the clip rule's simplex end) and a header reading
    'target None' when no divergence could reach the goal. Under warnings as
    errors (this suite's filter) the first would fail; the header now names
    the width target it compared, and each row says why it is out of reach."""
    assert main(["calibrate", "--at-p", at_p]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    header = captured.out.splitlines()[0]
    assert "target width, at p = " in header and "None" not in header
    assert "out of the band's reach" in captured.out and "nan" not in captured.out.lower()
