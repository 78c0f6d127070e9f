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
from geogpvae.engine.check_values import CheckValues, check_entries, predictive_nll
from geogpvae.engine.data import field_data, neighbourhood_context


@pytest.fixture(scope="module")
def field():
    return make_field(grid_points((14, 14), 1 / 13), n_vars=3, n_latent=2, lengthscale=0.3,
                      missing=0.4, noise=0.1, rng=4)




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
