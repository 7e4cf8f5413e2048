"""The theory figures run on small inputs and draw what they claim."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

import bandsolve as bs
from bandsolve.baselines import clip_higher_bounds, dcpo_bounds, ppo_bounds
from bandsolve.studies.theory import figure as bounds


def test_baselines():
    p = np.array([0.0, 0.08, 1.0])
    assert np.all(ppo_bounds(p)[0] == 0.8) and np.all(ppo_bounds(p)[1] == 1.2)
    assert np.all(clip_higher_bounds(p)[1] == 1.28)
    lo, hi = dcpo_bounds(p)
    np.testing.assert_allclose(lo, [0.5, 0.5, 0.5 + 0.5 * np.sqrt(1 - 0.64)])
    np.testing.assert_allclose(hi, [10.0, 0.5 + 0.5 * np.sqrt(1 + 0.8 / 0.08), 0.5 + 0.5 * np.sqrt(1.8)])
    with pytest.raises(ValueError, match="must lie in"):
        dcpo_bounds(1.5)


def test_figure1_draws_every_rule_and_the_simplex():
    p = np.linspace(0.05, 1.0, 12)
    fig = bounds.figure1(p=p, delta=0.1)
    ax_r, ax_d = fig.axes
    labels = [line.get_label() for line in ax_r.lines if not line.get_label().startswith("_")]
    assert labels == ["simplex limits 0 and 1/p", "Band-KL", "Band-TV", r"Band-$\chi^2$", "DCPO",
                      "Clip-Higher [0.8, 1.28]", "PPO [0.8, 1.2]"]
    # upper and lower curve per rule, two simplex limits, on both panels
    assert len(ax_r.lines) == len(ax_d.lines) == 2 + 2 * 6
    band_kl = next(line for line in ax_r.lines if line.get_label() == "Band-KL")
    np.testing.assert_allclose(band_kl.get_ydata(), bs.band(p, 0.1, "kl")[1])
    change_kl = next(line for line in ax_d.lines if line.get_label() == "Band-KL")
    np.testing.assert_allclose(change_kl.get_ydata(), p * (bs.band(p, 0.1, "kl")[1] - 1))


def test_figure2_regions_follow_the_bounds():
    pi_old = np.array([0.05, 0.5, 0.8])
    pi_new = np.array([0.0, 0.05, 0.1, 0.5, 0.99])
    code = bounds.plane_regions(pi_old, pi_new, delta=0.1)
    assert code.shape == (5, 3)
    lo, hi = bs.band(0.05, 0.1, "kl")
    # pi_new = 0.1 at pi_old = 0.05 is r = 2: inside Band-KL, outside Clip-Higher
    assert lo <= 2.0 <= hi and code[2, 0] == bounds._BAND_ONLY
    assert code[1, 0] == bounds._BOTH  # r = 1
    # r = 1.2375 at p = 0.8: within Clip-Higher's 1.28, above KL's 1.17
    assert bs.band(0.8, 0.1, "kl")[1] < 0.99 / 0.8 < 1.28
    assert code[4, 2] == bounds._CLIP_ONLY
    assert code[0, 1] == bounds._NEITHER  # r = 0 at p = 0.5
    fig = bounds.figure2(n=20)
    assert len(fig.axes[0].images) == 1 and fig.axes[0].get_legend() is not None


@pytest.mark.parametrize("make", [bounds.figure_all_divergences, bounds.figure_delta_sweep,
                                  bounds.figure_tail])
def test_other_figures_run_on_small_inputs(make):
    p = np.logspace(-4, 0, 9) if make is bounds.figure_tail else np.linspace(0.05, 1, 9)
    fig = make(p=p)
    assert all(len(ax.lines) >= 2 for ax in fig.axes)


def test_write_figures_writes_png_and_pdf(tmp_path):
    written = bounds.write_figures(str(tmp_path))
    assert len(written) == 2 * len(bounds.FIGURES)
    assert all((tmp_path / f"{name}.png").stat().st_size > 10_000 for name in bounds.FIGURES)


def test_a_t_band_over_few_seeds_stays_within_the_metric_range():
    """Regression: the 3-seed smoke figures drew tail-mass bands above 1 and
    below 0 (a t interval with 2 degrees of freedom is wide); the band is now
    drawn within the metric's range, and the mean is untouched."""
    import matplotlib.pyplot as plt

    from bandsolve.studies.plotting import band_plot

    values = np.array([[0.99, 0.2, 1.0], [0.98, 0.01, 1.0]]).T  # (steps, seeds)
    fig, ax = plt.subplots()
    band_plot(ax, {"r": {"tail_mass": values}}, "tail_mass", "y", "t", {"r": {"color": "C0"}},
              limits=(0.0, 1.0))
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == 0.0 and band.max() == 1.0  # clipped on both sides
    np.testing.assert_allclose(ax.lines[0].get_ydata(), values.mean(axis=1))
    fig, ax = plt.subplots()
    band_plot(ax, {"r": {"tail_mass": values}}, "tail_mass", "y", "t", {"r": {"color": "C0"}})
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() < 0.0 and band.max() > 1.0  # what it drew before
    plt.close("all")


def test_a_log_panel_over_few_seeds_shows_its_means_not_twenty_decades_of_band():
    """Regression: the 3-seed smoke figure's per-step KL panels spanned 1e-20
    to 1e8 (the band of a geometric mean over 3 seeds), which flattened every
    mean; the view is now the means and a decade either side."""
    import matplotlib.pyplot as plt

    from bandsolve.studies.plotting import band_plot

    values = np.array([[1e-2, 1e-12, 1e-3], [1e-3, 1e-1, 1e-11]]).T  # (steps, seeds)
    fig, ax = plt.subplots()
    band_plot(ax, {"r": {"step_kl": values}}, "step_kl", "y", "t", {"r": {"color": "C0"}},
              log=True)
    means = np.exp(np.log(values).mean(axis=1))
    np.testing.assert_allclose(ax.get_ylim(), (means.min() / 10, means.max() * 10))
    plt.close("all")
