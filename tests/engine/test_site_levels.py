"""Site levels of station networks: the random-intercept estimates, their moments and the engine's use."""

import numpy as np
import pytest
import torch

from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.posterior import Prediction
from geogpvae.engine.site_levels import fit_site_levels, site_rows, with_levels
from geogpvae.errors import InputError


def network(levels, n_days, rng, noise=1.0, smooth=0.0):
    """(x (T*S, 2) as (day, site), values (T*S, 1)): each site's level plus noise, or plus a series
    that is smooth over ``smooth`` days (an AR(1) with that correlation time)."""
    t, s = np.meshgrid(np.arange(n_days), np.arange(len(levels)), indexing="ij")
    x = np.column_stack([t.ravel(), s.ravel()]).astype(float)
    if smooth:
        phi = np.exp(-1.0 / smooth)
        e = np.empty((n_days, len(levels)))
        e[0] = rng.normal(size=len(levels))
        for i in range(1, n_days):
            e[i] = phi * e[i - 1] + np.sqrt(1 - phi**2) * rng.normal(size=len(levels))
        e = e * noise
    else:
        e = rng.normal(scale=noise, size=(n_days, len(levels)))
    return x, (np.asarray(levels)[None, :] + e).reshape(-1, 1)


def test_strong_levels_are_kept_and_the_spread_of_the_levels_is_estimated():
    rng = np.random.default_rng(0)
    true = rng.normal(scale=5.0, size=60)
    x, y = network(true, 40, rng)
    fit = fit_site_levels(y - y.mean(), np.ones_like(y, dtype=bool), x, [1])
    assert fit.sites.shape == (60, 1) and fit.level.shape == (60, 1)
    assert fit.between[0] == pytest.approx(np.var(true), rel=0.3)
    # each level is nearly its site's mean (shrinkage 25 / (25 + 1 / 40)), known to about 1 / sqrt(40)
    means = (y - y.mean()).reshape(40, 60).mean(0)
    np.testing.assert_allclose(fit.level[:, 0], means, rtol=0.003)
    np.testing.assert_allclose(fit.var[:, 0], 1 / 40, rtol=0.4)


def test_the_level_is_the_random_intercept_posterior_of_a_dense_gaussian_model():
    """Independent noise, unequal counts: the level and its variance are the exact posterior of
    the site intercept given that site's values, under N(0, between) and the within variance."""
    rng = np.random.default_rng(1)
    true = rng.normal(scale=2.0, size=30)
    x, y = network(true, 50, rng)
    observed = rng.random(y.shape) < np.repeat(np.linspace(0.1, 0.9, 30)[None, :], 50, 0).reshape(-1, 1)
    y = y - y[observed].mean()
    fit = fit_site_levels(y, observed, x, [1])
    tau2 = fit.between[0]
    site = x[:, 1].astype(int)
    # the error variance the estimate used for each site, recovered from its posterior variance
    for s in (0, 7, 29):
        v = y[observed[:, 0] & (site == s), 0]
        err = fit.var[s, 0] * tau2 / (tau2 - fit.var[s, 0])  # var = tau2 err / (tau2 + err)
        # dense: intercept a ~ N(0, tau2), v = a 1 + e with cov(e) = n err I (err = sigma2 / n)
        n = len(v)
        cov = tau2 * np.ones((n, n)) + n * err * np.eye(n)
        k = tau2 * np.ones(n)
        mean = k @ np.linalg.solve(cov, v)
        var = tau2 - k @ np.linalg.solve(cov, k)
        assert fit.level[s, 0] == pytest.approx(mean, rel=1e-9, abs=1e-12)
        assert fit.var[s, 0] == pytest.approx(var, rel=1e-9)
    # the within-site variance is the pooled variance about each site's mean, inflated only where
    # the site means spread more than it explains; with independent noise err is sigma2 / n or more
    within = np.mean([np.var(y[observed[:, 0] & (site == s), 0], ddof=1) for s in range(30)])
    counts = np.bincount(site[observed[:, 0]], minlength=30)
    err = fit.var[:, 0] * tau2 / (tau2 - fit.var[:, 0])
    assert np.all(err >= 0.8 * within / counts)


def test_smooth_series_without_levels_get_almost_none():
    """A series correlated over 10 days has site means that scatter 20 times more than
    independent noise's; they are not levels, and the estimate keeps almost none of them."""
    rng = np.random.default_rng(2)
    x, y = network(np.zeros(40), 300, rng, smooth=10.0)
    fit = fit_site_levels(y - y.mean(), np.ones_like(y, dtype=bool), x, [1])
    means = (y - y.mean()).reshape(300, 40).mean(0)
    assert np.sqrt(np.mean(fit.level**2)) < 0.5 * np.sqrt(np.mean(means**2))
    assert fit.between[0] < 0.02


def test_unseen_and_new_sites_get_level_zero_and_the_variance_of_the_levels():
    rng = np.random.default_rng(3)
    x, y = network(rng.normal(scale=3.0, size=10), 20, rng)
    observed = np.ones_like(y, dtype=bool)
    observed[x[:, 1] == 4] = False  # site 4 never observed
    fit = fit_site_levels(np.where(observed, y - y[observed].mean(), 0.0), observed, x, [1])
    level, var = fit.at(fit.rows(np.array([[0.0, 4.0], [3.0, 99.0], [5.0, 2.0]])))
    assert level[0, 0] == level[1, 0] == 0.0 and var[0, 0] == var[1, 0] == fit.between[0] > 0
    assert level[2, 0] == fit.level[2, 0] and var[2, 0] < 0.1 * fit.between[0]
    np.testing.assert_array_equal(site_rows(fit.sites, np.array([[2.0], [2.5]])), [2, -1])


def test_with_levels_gives_the_exact_moments_of_level_plus_anomaly():
    """Normal variables: means add, variances add. Log variables: the product of two independent
    log-normals, whose moments are known in closed form."""
    rng = np.random.default_rng(4)
    mu, sd = rng.normal(size=(5, 2)), rng.uniform(0.1, 1.0, size=(5, 2))
    level, var = rng.normal(size=(5, 2)), rng.uniform(0.0, 0.5, size=(5, 2))
    log = np.array([False, True])
    mean = np.where(log, np.exp(mu + sd**2 / 2), mu)
    std = np.where(log, mean * np.sqrt(np.expm1(sd**2)), sd)
    pred = Prediction(mean=mean, std=std, mean_model=mu, std_model=sd, source=np.zeros(5, np.int8))
    out = with_levels(pred, level, var, log, np.full(2, np.nan))
    total_mu, total_var = mu + level, sd**2 + var
    np.testing.assert_allclose(out.mean_model, total_mu)
    np.testing.assert_allclose(out.std_model, np.sqrt(total_var))
    np.testing.assert_allclose(out.mean[:, 0], total_mu[:, 0])
    np.testing.assert_allclose(out.std[:, 0], np.sqrt(total_var[:, 0]))
    np.testing.assert_allclose(out.mean[:, 1], np.exp(total_mu[:, 1] + total_var[:, 1] / 2), rtol=1e-12)
    np.testing.assert_allclose(out.std[:, 1], out.mean[:, 1] * np.sqrt(np.expm1(total_var[:, 1])), rtol=1e-10)
    held = with_levels(pred, level, var, log, np.array([np.nan, 2.0]))  # a variable held constant
    np.testing.assert_array_equal(held.mean[:, 1], mean[:, 1])
    np.testing.assert_array_equal(held.std[:, 1], std[:, 1])


# --------------------------------------------------------------------------- the engine
@pytest.fixture(scope="module")
def wells():
    """40 sites, 60 dates, levels of spread 3 and a day-to-day signal shared by nearby sites;
    each site seen on a sixth of the dates."""
    rng = np.random.default_rng(5)
    n_sites, n_days = 40, 60
    pos = rng.uniform(0, 10, size=(n_sites, 2))
    t, s = np.meshgrid(np.arange(n_days), np.arange(n_sites), indexing="ij")
    x = np.column_stack([t.ravel() * 1.0, pos[s.ravel()]])
    truth = (rng.normal(scale=3.0, size=n_sites)[s] + 0.3 * rng.normal(size=(n_days, n_sites))).reshape(-1, 1)
    observed = rng.random(truth.shape) < 1 / 6
    hidden = observed & (rng.random(truth.shape) < 0.3)
    return x, truth, np.where(observed & ~hidden, truth, np.nan), hidden


@pytest.mark.filterwarnings("ignore:epochs=")
def test_site_levels_let_the_engine_fill_each_site_at_its_own_level(wells):
    x, truth, values, hidden = wells
    opts = dict(epochs=10, seed=0, progress=False, neighbours=8)
    with_sites = GPVAEEngine(**opts).fit(x, values, site_axes=[1, 2])
    plain = GPVAEEngine(**opts).fit(x, values)
    rmse = [float(np.sqrt(np.mean((e.predict().mean[hidden[:, 0], 0] - truth[hidden]) ** 2)))
            for e in (with_sites, plain)]
    assert rmse[0] < 0.4 and rmse[0] < 0.25 * rmse[1]  # the noise is 0.3, the levels 3
    assert with_sites.site_levels_.sites.shape == (40, 2)


def test_a_saved_engine_with_site_levels_predicts_the_same(wells):
    x, truth, values, hidden = wells
    eng = GPVAEEngine(epochs=3, seed=0, progress=False, neighbours=8).fit(x, values, site_axes=[1, 2])
    again = GPVAEEngine.from_state_dict(eng.state_dict(), progress=False)
    np.testing.assert_array_equal(again.predict().mean, eng.predict().mean)
    np.testing.assert_array_equal(again.predict(x[:50], values[:50]).std, eng.predict(x[:50], values[:50]).std)
    # a new date at a known site keeps that site's level; a new site gets the spread of the levels
    known = eng.predict(x[[0]] + [100.0, 0.0, 0.0])
    level = eng.site_levels_.level[eng._site_rows[0]]
    far = eng.predict(np.array([[100.0, 50.0, 50.0]]))
    assert abs(known.mean[0, 0] - (eng.loc[0] + level[0])) < 1.5
    assert far.std[0, 0] > np.sqrt(eng.site_levels_.between[0])
    no_data = GPVAEEngine.from_state_dict(eng.state_dict(include_data=False), progress=False)
    np.testing.assert_array_equal(no_data.predict(x[:50], values[:50]).mean, eng.predict(x[:50], values[:50]).mean)


@pytest.mark.parametrize("axes", [[], [3], [1, 1], [-1]])
def test_site_axes_that_name_no_columns_are_refused_before_training(wells, axes):
    x, _, values, _ = wells
    with pytest.raises(InputError, match="site_axes"):
        GPVAEEngine(epochs=1, progress=False).fit(x, values, site_axes=axes)


def test_a_state_with_damaged_site_levels_is_refused(wells):
    x, _, values, _ = wells
    state = GPVAEEngine(epochs=1, seed=0, progress=False, neighbours=8).fit(x, values, site_axes=[1, 2]).state_dict()
    bad = {**state, "site_levels": {**state["site_levels"], "var": -state["site_levels"]["var"] - 1}}
    with pytest.raises(ValueError, match="negative variances"):
        GPVAEEngine.from_state_dict(bad)
    bad = {**state, "site_levels": {**state["site_levels"], "level": torch.zeros(3, 1)}}
    with pytest.raises(ValueError, match="level"):
        GPVAEEngine.from_state_dict(bad)
    bad = {**state, "field": {**state["field"], "site_rows": state["field"]["site_rows"] + 1000}}
    with pytest.raises(ValueError, match="site_rows"):
        GPVAEEngine.from_state_dict(bad)
