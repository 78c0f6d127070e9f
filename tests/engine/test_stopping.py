"""The stopping rule: held-out observed values, their score, when training stops, what is kept."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.model import GPVAE
from geogpvae.engine.stopping import CheckValues, StopRule, check_entries, predictive_nll
from geogpvae.engine.training import field_data, neighbourhood_context


@pytest.fixture(scope="module")
def field():
    return make_field(grid_points((14, 14), 1 / 13), n_vars=3, n_latent=2, lengthscale=0.3,
                      missing=0.4, noise=0.1, rng=4)


RULE = {"every": 5, "patience": 20, "growth": 0.2, "min_steps": 20, "tolerance": 0.05}


def test_check_entries_are_a_reproducible_share_of_the_observed_values():
    rng = np.random.default_rng(0)
    observed = rng.random((500, 3)) < np.array([0.9, 0.5, 0.03])  # the last variable is sparse
    held = check_entries(observed, 0.1, seed=1)
    assert not (held & ~observed).any()
    counts = observed.sum(0)
    assert held[:, 0].sum() == round(0.1 * counts[0]) and held[:, 1].sum() == round(0.1 * counts[1])
    assert held[:, 2].sum() == 0  # fewer than 2 * min_left values: nothing taken
    assert np.array_equal(held, check_entries(observed, 0.1, seed=1))
    assert not np.array_equal(held, check_entries(observed, 0.1, seed=2))
    assert not check_entries(observed, 0.0, seed=1).any()
    capped = check_entries(observed, 0.4, seed=1, max_values=30)
    assert capped.sum() <= 30


def test_held_out_values_are_invisible_to_training(field):
    x, y, observed = field.points, np.nan_to_num(field.values), field.observed
    held = check_entries(observed, 0.2, seed=0)
    cfg = GPVAEConfig(neighbours=6, context=4)
    data = field_data(x, y, observed, cfg, device=torch.device("cpu"), dtype=torch.float64, check=held)
    obs_t = data.observed.numpy()
    assert not (obs_t & held).any() and np.array_equal(obs_t, observed & ~held)
    assert (data.y.numpy()[held] == 0).all()
    # the context summaries are those of the field without the held-out values
    visible = observed & ~held
    expected = neighbourhood_context(x, np.where(visible, y, 0.0), visible, cfg.context_scales)
    np.testing.assert_allclose(data.context.numpy(), expected)
    rows = data.check.rows.numpy()
    assert np.array_equal(rows, np.flatnonzero(held.any(1)))
    np.testing.assert_allclose(data.check.y.numpy()[data.check.mask.numpy()], y[rows][held[rows]])


def test_predictive_nll_matches_the_mixture_moments_by_hand():
    torch.manual_seed(0)
    model = GPVAE(2, 2, 2, context_dim=0).double().eval()
    y = torch.randn(5, 2, dtype=torch.float64)
    visible = torch.tensor([[True, False]] * 5)
    mask = torch.tensor([[False, True]] * 4 + [[True, True]])
    check = CheckValues(rows=torch.arange(5), mask=mask, y=torch.where(mask, y, 0.0))
    eps = torch.randn(7, 5, 2, dtype=torch.float64)
    with torch.no_grad():
        mean, var = model.encode(y, visible)
    per_var = {0: [], 1: []}
    for i in range(5):
        with torch.no_grad():
            draws = torch.stack([model.decode(mean[i] + var[i].sqrt() * eps[s, i]) for s in range(7)])
        for j in range(2):
            if mask[i, j]:
                mu = float(draws[:, j].mean())
                v = float(((draws[:, j] - mu) ** 2).mean() + model.noise_var[j])
                per_var[j].append((float(y[i, j]) - mu, v))

    def nll(err, v):
        return 0.5 * math.log(2 * math.pi * v) + 0.5 * err**2 / v

    raw = np.mean([np.mean([nll(e, v) for e, v in per_var[j]]) for j in per_var])
    assert predictive_nll(model, (y, visible, None), check, eps, calibrated=False) == pytest.approx(raw, rel=1e-10)
    scaled = []
    for pairs in per_var.values():  # each variable's variances scaled by its mean squared z
        f = np.mean([e**2 / v for e, v in pairs])
        scaled.append(np.mean([nll(e, f * v) for e, v in pairs]))
    got = predictive_nll(model, (y, visible, None), check, eps)
    assert got == pytest.approx(np.mean(scaled), rel=1e-10) and got <= raw + 1e-12
    # weighted by the variables' shares of the values to impute
    weighted = CheckValues(rows=check.rows, mask=mask, y=check.y, weights=torch.tensor([0.8, 0.2], dtype=torch.float64))
    want = 0.8 * scaled[0] + 0.2 * scaled[1]
    assert predictive_nll(model, (y, visible, None), weighted, eps) == pytest.approx(want, rel=1e-10)
    # a variable without held-out values drops out and the others' weights are renormalised
    only_second = CheckValues(rows=check.rows[:4], mask=mask[:4], y=check.y[:4], weights=weighted.weights)
    with torch.no_grad():
        alone = predictive_nll(model, (y[:4], visible[:4], None), CheckValues(rows=check.rows[:4], mask=mask[:4], y=check.y[:4]), eps[:, :4])
    assert predictive_nll(model, (y[:4], visible[:4], None), only_second, eps[:, :4]) == pytest.approx(alone, rel=1e-12)
    # without the shape of the variances: 0.5 log(2 pi e MSE) per variable, the mean alone judged
    flat = [0.5 * math.log(2 * math.pi * math.e * np.mean([e**2 for e, _ in per_var[j]])) for j in per_var]
    raw_per_var = [np.mean([nll(e, v) for e, v in per_var[j]]) for j in per_var]
    for shape, want, want_raw in ((False, np.mean(flat), np.mean(flat)),
                                  ([True, False], (scaled[0] + flat[1]) / 2, (raw_per_var[0] + flat[1]) / 2),
                                  ([False, True], (flat[0] + scaled[1]) / 2, (flat[0] + raw_per_var[1]) / 2)):
        got = predictive_nll(model, (y, visible, None), check, eps, shape=torch.tensor(shape))
        assert got == pytest.approx(want, rel=1e-10), shape
        assert predictive_nll(model, (y, visible, None), check, eps, calibrated=False,
                              shape=torch.tensor(shape)) == pytest.approx(want_raw, rel=1e-10), shape
    assert predictive_nll(model, (y, visible, None), check, eps, shape=torch.tensor([True, True])) == pytest.approx(np.mean(scaled))


def test_stop_rule_stops_when_the_gain_over_the_stretch_is_small_and_keeps_the_best_weights():
    rule = StopRule(every=10, patience=30, growth=0.5, min_steps=50, tolerance=0.05)
    # fast gains, then slow ones (0.01 per score), then a slight rise
    scores = [5.0, 4.0, 3.0, 2.5, 2.0, 1.9, 1.8, 1.75, 1.7, 1.69, 1.68, 1.67, 1.66, 1.65, 1.66, 1.67, 1.68,
              1.69, 1.7, 1.7, 1.7]
    stopped_at = None
    live = torch.zeros(1)
    for i, score in enumerate(scores):
        step = 10 * (i + 1)
        assert rule.due(step)
        live.fill_(float(step))  # the live weights change in place between scores
        if rule.update(step, score, {"w": live}):
            stopped_at = step
            break
    # by hand: stop at the first step s >= 50 where min(scores up to s - max(30, s/2)) - best < 0.05
    expected = None
    for i in range(len(scores)):
        step = 10 * (i + 1)
        start = step - max(30, 0.5 * step)
        before = [v for j, v in enumerate(scores[: i + 1]) if 10 * (j + 1) <= start]
        if step >= 50 and before and min(before) - min(scores[: i + 1]) < 0.05:
            expected = step
            break
    assert stopped_at == expected == 200
    assert rule.record["best"] == min(scores[:15]) and float(rule.record["best_weights"]["w"]) == 140
    assert not rule.due(stopped_at + 5)
    # a score that never improves by the tolerance stops right after min_steps
    flat = StopRule(every=10, patience=20, growth=0.0, min_steps=40, tolerance=0.1)
    steps = [s for s in range(10, 200, 10) if flat.update(s, 1.0 - 0.001 * s, {})]
    assert steps[0] == 40


def test_fit_stops_on_held_out_values_and_keeps_the_best_weights(field):
    opts = dict(progress=False, calibrate=False, seed=1, holdout=0.1, extra={"stop_rule": RULE})
    eng = GPVAEEngine(**opts).fit(field.points, field.values)
    ts = eng.train_state
    assert ts.done and not eng.interrupted
    cap = GPVAEConfig(**{k: v for k, v in opts.items() if k != "progress"}).n_epochs(len(field.points))
    assert ts.epoch < cap  # stopped by the rule, long before the step budget
    best = ts.monitor["best_step"]
    assert ts.monitor["best"] == min(ts.monitor["scores"]) == ts.monitor["scores"][ts.monitor["steps"].index(best)]
    for name, value in ts.monitor["best_weights"].items():
        torch.testing.assert_close(eng.model.state_dict()[name], value)
    # prediction uses every observed value again, held-out ones included
    assert np.array_equal(eng._data.observed.numpy(), field.observed)
    pred = eng.predict(samples=8)
    assert np.isfinite(pred.mean).all()


def test_explicit_epochs_or_no_holdout_train_the_whole_budget_on_every_value(field):
    eng = GPVAEEngine(epochs=4, progress=False, calibrate=False).fit(field.points, field.values)
    assert eng.train_state.epoch == 4 and eng._data.check is None and not eng.train_state.monitor
    cfg = GPVAEConfig(holdout=0.0)
    assert not cfg.stops_early() and GPVAEConfig(holdout=0.1).stops_early()
    assert not GPVAEConfig(holdout=0.1, epochs=3).stops_early()


def test_resume_with_the_stopping_rule_matches_the_uninterrupted_run(field):
    opts = dict(progress=False, calibrate=False, seed=2, holdout=0.1, beta=None, extra={"stop_rule": RULE})
    full = GPVAEEngine(**opts).fit(field.points, field.values)
    saved = {}

    def keep(engine):
        if engine.train_state.epoch == 15:
            saved["ckpt"] = engine.checkpoint()

    stopped = GPVAEEngine(**opts).fit(field.points, field.values, callback=keep,
                                      should_stop=lambda: "ckpt" in saved)
    assert stopped.interrupted
    resumed = GPVAEEngine(**opts).fit(field.points, field.values, resume=saved["ckpt"])
    assert not resumed.interrupted and resumed.train_state.steps == full.train_state.steps
    assert resumed.train_state.monitor["best_step"] == full.train_state.monitor["best_step"]
    for name, value in full.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], value, rtol=1e-5, atol=1e-6)


def test_the_stopping_rule_s_ceiling_may_be_a_multiple_of_the_default_budget():
    """``extra["stop_ceiling"]``: the rule may run that many times the fixed budget's epochs
    (rounded up), whatever MAX_STEPS allows; without it, MAX_STEPS steps as before."""
    for n, batch in ((2304, 256), (17280, None), (500, None)):
        budget = GPVAEConfig(batch_size=batch).n_epochs(n)
        ceiling = GPVAEConfig(batch_size=batch, holdout=0.1, extra={"stop_ceiling": 2}).n_epochs(n)
        assert ceiling == 2 * budget
        assert GPVAEConfig(batch_size=batch, holdout=0.1, extra={"stop_ceiling": 1.5}).n_epochs(n) == math.ceil(1.5 * budget)
    assert GPVAEConfig(holdout=0.1).n_epochs(2304) == 445  # MAX_STEPS (4000) at 9 steps an epoch
    assert GPVAEConfig(holdout=0.1, epochs=7, extra={"stop_ceiling": 2}).n_epochs(2304) == 7  # explicit epochs win
