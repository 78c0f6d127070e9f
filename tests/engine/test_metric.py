"""Neighbours in the learnt metric: the axis factors, and that every neighbour set follows them."""

from __future__ import annotations

import numpy as np
import pytest

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine import core, metric
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.metric import axis_scales, warmup_epochs

# on a square grid, spacing 1 along both axes, the nearest locations lie along both axes
# alike; correlation reaches LONG along axis 0 and SHORT along axis 1
LONG, SHORT = 12.0, 1.0


@pytest.fixture(scope="module")
def field():
    return make_field(grid_points((28, 28)), n_vars=2, n_latent=2, lengthscale=[LONG, SHORT],
                      missing=0.3, noise=0.05, nonlinear=0.0, rng=3)


def _fit(field, learnt_ls, monkeypatch, points=None, **options) -> GPVAEEngine:
    """An engine fitted with warm-ups that 'learn' ``learnt_ls`` (L, D) in the field's units,
    whatever units the warm-up's coordinates are in (as a converged warm-up would)."""
    seen = []
    points = field.points if points is None else points

    def warm(engine, x, values):
        seen.append(x.copy())
        return np.asarray(learnt_ls, dtype=float) * np.ptp(x, 0) / np.ptp(field.points, 0)

    monkeypatch.setattr(GPVAEEngine, "_warm_fit", warm)
    eng = GPVAEEngine(epochs=3, neighbours=8, progress=False, **options).fit(points, field.values)
    eng.warm_inputs = seen
    return eng


def _along(x: np.ndarray, nbr: np.ndarray) -> np.ndarray:
    """Mean |offset| to the valid neighbours along each axis, shape (D,)."""
    valid = nbr >= 0
    off = np.abs(x[np.where(valid, nbr, 0)] - x[:, None, :])
    return (off * valid[..., None]).sum((0, 1)) / valid.sum()


def test_axis_scales_are_inverse_geometric_mean_lengthscales():
    ls = np.array([[2.0, 100.0], [8.0, 400.0]])
    np.testing.assert_allclose(axis_scales(ls), [1 / 4.0, 1 / 200.0])
    np.testing.assert_allclose(axis_scales(np.array([3.0, 0.5])), [1 / 3.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        axis_scales(np.array([[1.0, 0.0]]))


def test_warmup_is_a_small_share_of_the_fit():
    cfg = GPVAEConfig()
    assert warmup_epochs(cfg, 12_000, None) == 6  # 47 steps of 256 per epoch: 282 steps
    assert warmup_epochs(cfg, 359, None) == 63  # full batch, 1000 steps: 1/16 of them
    assert warmup_epochs(cfg.replace(epochs=16), 500) == 1
    assert warmup_epochs(cfg.replace(epochs=16), 500, steps=40) == 40


def test_rounds_rescale_in_the_metric_learnt_so_far(field, monkeypatch):
    """Each round trains in the metric of the one before; a round that learns lengthscales
    of one (what a converged metric gives) changes nothing more."""
    eng = _fit(field, [[LONG, SHORT], [LONG / 4, SHORT]], monkeypatch)
    first, second, third = eng.warm_inputs
    np.testing.assert_allclose(first, field.points - field.points.mean(0), atol=1e-9)
    np.testing.assert_allclose(second, first / [LONG / 2, SHORT])  # geometric mean over channels
    np.testing.assert_allclose(third, second)
    np.testing.assert_allclose(eng.x_scale_, 1 / np.array([LONG / 2, SHORT]))


def test_neighbours_follow_the_learnt_metric(field, monkeypatch):
    """Training and context neighbours run along the long axis in the learnt metric; in the
    given coordinates (an isotropic metric, or a learnt one close to it) along both axes alike."""
    learnt = _fit(field, [[LONG, SHORT], [LONG / 2, SHORT]], monkeypatch)
    fixed = _fit(field, [[1.0, 1.0]], monkeypatch)
    beyond = _fit(field, [[4.0, 1.0]], monkeypatch)  # axes 4x apart: more than MIN_RATIO (3)
    near = _fit(field, [[2.0, 1.0]], monkeypatch)  # 2x apart: the coordinates are kept
    assert len(fixed.warm_inputs) == 1 and np.all(np.asarray(fixed.x_scale_) == 1.0)
    assert np.all(np.asarray(near.x_scale_) == 1.0) and len(near.warm_inputs) == 2  # the 3rd cannot reach 3x
    assert beyond.x_scale_[1] / beyond.x_scale_[0] == pytest.approx(4)
    x = field.points
    for eng, long_axis in ((learnt, True), (beyond, True), (fixed, False), (near, False)):
        nbr = eng._data.host("nbr").numpy()
        train_off, ctx_off = _along(x, nbr), _along(x, eng._context_index)
        if long_axis:
            assert train_off[0] > 2 * train_off[1] and ctx_off[0] > 2 * ctx_off[1], (train_off, ctx_off)
        else:
            assert 0.5 < train_off[0] / train_off[1] < 2 and 0.5 < ctx_off[0] / ctx_off[1] < 2


def test_new_locations_are_put_in_the_learnt_metric(field, monkeypatch):
    """Stretching an axis of the input changes nothing once the metric is learnt: the model
    coordinates are the same, and so are predictions at new locations given in either unit."""
    stretch = np.array([5.0, 1.0])
    a = _fit(field, [[LONG, SHORT]], monkeypatch)
    b = _fit(field, [[LONG, SHORT]], monkeypatch, points=field.points * stretch)
    np.testing.assert_allclose(b.x_scale_, a.x_scale_ / stretch)
    np.testing.assert_allclose(b._x, a._x, atol=1e-9)
    new = np.random.default_rng(0).uniform(0, 27, size=(300, 2))
    pa, pb = a.predict(new), b.predict(new * stretch)
    np.testing.assert_allclose(pb.mean, pa.mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(pb.std, pa.std, rtol=1e-4, atol=1e-5)


def test_scale_survives_save_and_load(field, monkeypatch):
    eng = _fit(field, [[LONG, SHORT]], monkeypatch)
    again = GPVAEEngine.from_state_dict(eng.state_dict(), progress=False)
    np.testing.assert_array_equal(again.x_scale_, eng.x_scale_)
    new = field.points[::37] + 0.5
    a, b = eng.predict(new), again.predict(new)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-5, atol=1e-6)


def test_no_warmup_without_a_learnt_kernel_or_a_second_axis(field, monkeypatch):
    for options, points in (({"kernel": __import__("gpytorch").kernels.RBFKernel()}, field.points),
                            ({}, field.points[:, :1])):
        eng = _fit(field, [[LONG, SHORT]], monkeypatch, points=points, **options)
        assert eng.warm_inputs == [] and np.all(np.asarray(eng.x_scale_) == 1.0)


def test_station_network_learns_time_against_space():
    """The case the metric is for: days and km. The warm-up learns that a day is worth far more
    than a km, and the prior's neighbours then reach other stations much more often."""
    import geogpvae
    from geogpvae.datasets import make_station_network

    ds = make_station_network(15, 80, seed=0)
    share = {}
    for mode in ("auto", "fixed"):  # fixed: warm-ups that learn the given coordinates' metric
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(core, "warmup_epochs", lambda config, n, steps=None: 30)  # 150 steps a round
            if mode == "fixed":
                mp.setattr(GPVAEEngine, "_warm_fit", lambda self, x, values: np.ones((1, x.shape[1])))
            imp = geogpvae.GPVAEImputer(epochs=2, neighbours=10, progress=False)
            eng = imp.fit(ds, ["v0"]).engine_
        x = eng._x
        nbr = eng._data.host("nbr").numpy()
        valid = nbr >= 0
        other = np.any(x[np.where(valid, nbr, 0)][..., 1:] != x[:, None, 1:], axis=-1)
        share[mode] = float(other[valid].mean())
        if mode == "auto":  # columns: days, then the three sphere columns (km)
            scale = np.asarray(eng.x_scale_)
            assert scale[0] > metric.MIN_RATIO * scale[1:].max(), scale
    assert share["auto"] > share["fixed"] + 0.2, share


def test_rounds_stop_once_they_cannot_reach_the_threshold(field, monkeypatch):
    """A first round that barely moves the axes (an isotropic field) decides: even moving
    ROUND_GROWTH times as far in every remaining round would stay within MIN_RATIO. A first
    round that moves them further goes on, and the outcome is what all rounds would give."""
    still = _fit(field, [[1.05, 1.0]], monkeypatch)
    assert len(still.warm_inputs) == 1 and np.all(np.asarray(still.x_scale_) == 1.0)
    assert still.metric_trace_ == pytest.approx([1.05])
    # 1.2 after one round: 1.2 ** (1 + 2 * 2) = 2.5 <= 3 stops; 1.3 ** 5 = 3.7 goes on (and the
    # second round, converged, stops it)
    assert len(_fit(field, [[1.2, 1.0]], monkeypatch).warm_inputs) == 1
    assert len(_fit(field, [[1.3, 1.0]], monkeypatch).warm_inputs) == 2
    # one round of 2x, then converged (the rescaled warm-up learns lengthscales of one): the
    # second round cannot move it on, so the third is skipped and the coordinates are kept
    near = _fit(field, [[2.0, 1.0]], monkeypatch)
    assert len(near.warm_inputs) == 2 and np.all(np.asarray(near.x_scale_) == 1.0)
    assert near.metric_trace_ == pytest.approx([2.0, 2.0])
    # beyond the threshold every round runs (they refine the metric it will use)
    assert len(_fit(field, [[4.0, 1.0]], monkeypatch).warm_inputs) == 3


def test_projection_of_the_remaining_rounds():
    step = np.array([1.0, 1.2])
    assert not metric._may_reach(np.array([1.0, 1.1]), step, 0, 1.1)  # no round left
    assert metric._may_reach(np.array([1.0, 1.1]), step, 0, 1.09)
    assert metric._may_reach(step, step, 2, 2.4) and not metric._may_reach(step, step, 2, 2.5)
    assert metric.spread([4.0, 1.0, 2.0]) == 4.0


def test_a_warm_up_that_diverges_says_so():
    # lr far too large: the warm-up's lengthscales collapse; the error names the divergence
    # and what to try, not the metric's internal check of its inputs
    import geogpvae
    from geogpvae.datasets import make_gaussian_field

    ds = make_gaussian_field((10, 10), n_vars=2, seed=1)
    with pytest.raises(FloatingPointError, match=r"training diverged in the warm-up .* try a smaller lr"):
        geogpvae.impute(ds, epochs=2, lr=1e9, progress=False)


def test_no_warm_up_round_keeps_the_coordinates():
    from geogpvae.engine.core import GPVAEEngine
    from geogpvae.engine.metric import learn_metric

    engine = GPVAEEngine(neighbours=4, progress="log")
    x = np.random.default_rng(0).normal(size=(30, 2))
    y = np.ones((30, 1))
    assert learn_metric(engine._warm_fit, x, y, np.ones((30, 1), bool), rounds=0).tolist() == [1.0, 1.0]
