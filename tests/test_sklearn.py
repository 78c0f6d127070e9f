"""GPVAERegressor: scikit-learn's estimator checks, missing values, pipelines and grid searches;
both estimators' parameters against GPVAEConfig."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from geogpvae import GPVAEConfig, GPVAEImputer
from geogpvae.errors import TrainingWarning
from geogpvae.sklearn import GPVAERegressor

TINY = dict(neighbours=4, epochs=3, encoder_hidden=(8,), decoder_hidden=(8,), samples=4, beta=1.0, calibrate=False)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrainingWarning)  # short test fits are the point
        yield


@parametrize_with_checks([GPVAERegressor(**TINY)])
def test_passes_the_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("cls", [GPVAEImputer, GPVAERegressor])
def test_every_engine_option_is_a_parameter_with_the_config_default(cls):
    signature = inspect.signature(cls.__init__).parameters
    for f in dataclasses.fields(GPVAEConfig):
        assert f.name in signature, f.name
        assert signature[f.name].default == getattr(GPVAEConfig(), f.name), f.name
        assert signature[f.name].kind is inspect.Parameter.KEYWORD_ONLY


def _field(n: int = 300, seed: int = 0):
    """Two correlated smooth variables on scattered 2-D sites, a fifth of each missing."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 2))
    a = np.sin(X[:, 0]) + np.cos(0.7 * X[:, 1])
    y = np.column_stack([a, 2 * a + 0.5 * np.sin(X[:, 1])]) + rng.normal(0, 0.05, (n, 2))
    hidden = rng.random(y.shape) < 0.2
    return X, y, np.where(hidden, np.nan, y)


def test_fits_missing_values_and_predicts_new_sites_with_their_uncertainty():
    X, truth, y = _field()
    reg = GPVAERegressor(neighbours=8, epochs=150, seed=1).fit(X[:250], y[:250])
    mean, std = reg.predict(X[250:], return_std=True)
    assert mean.shape == std.shape == (50, 2) and mean.dtype == np.float64
    assert (std > 0).all()
    assert r2_score(truth[250:], mean) > 0.8
    z = (truth[250:] - mean) / std
    assert 0.75 < np.mean(np.abs(z) < 1.96) <= 1.0  # intervals of about the right width
    assert reg.score(X[250:], truth[250:]) == pytest.approx(r2_score(truth[250:], mean))
    assert reg.predict(X[250:]).shape == (50, 2)
    one = GPVAERegressor(**TINY).fit(X, y[:, 0])
    assert one.predict(X[:5]).shape == (5,) and one.predict(X[:5], return_std=True)[1].shape == (5,)


def test_score_is_r2_over_the_observed_entries_only():
    X, truth, y = _field(120)
    reg = GPVAERegressor(**TINY).fit(X, y)
    pred = reg.predict(X)
    seen = np.isfinite(y)
    expected = np.mean([r2_score(y[seen[:, k], k], pred[seen[:, k], k]) for k in range(2)])
    assert reg.score(X, y) == pytest.approx(expected)
    weight = np.linspace(1, 2, len(X))
    expected = np.mean([r2_score(y[seen[:, k], k], pred[seen[:, k], k], sample_weight=weight[seen[:, k]])
                        for k in range(2)])
    assert reg.score(X, y, sample_weight=weight) == pytest.approx(expected)


def test_a_pipeline_and_a_grid_search_choose_the_neighbours():
    X, _, y = _field(200)
    search = GridSearchCV(make_pipeline(StandardScaler(), GPVAERegressor(**TINY)),
                          {"gpvaeregressor__neighbours": [4, 8]}, cv=KFold(3, shuffle=True, random_state=0))
    search.fit(X, y)
    assert search.best_params_["gpvaeregressor__neighbours"] in (4, 8)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert np.isfinite(cross_val_score(GPVAERegressor(**TINY), X, y, cv=3)).all()


def test_a_fitted_regressor_pickles_and_predicts_the_same():
    X, _, y = _field(100)
    reg = GPVAERegressor(**TINY).fit(X, y)
    again = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(again.predict(X[:10]), reg.predict(X[:10]))
    assert not hasattr(clone(reg), "engine_")


def test_bad_options_and_data_are_refused_before_training():
    X, _, y = _field(50)
    with pytest.raises(ValueError, match="unknown kernel 'gauss'"):
        GPVAERegressor(kernel="gauss").fit(X, y)
    with pytest.raises(ValueError, match=r"50 sample\(s\).*minimum of 61"):
        GPVAERegressor(neighbours=60).fit(X, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        GPVAERegressor(**TINY).fit(X, y[:-1])
    with pytest.raises(ValueError, match="dim 3"):
        GPVAERegressor(**TINY).fit(X, y[:, :, None])
    never = y.copy()
    never[:, 1] = np.nan
    with pytest.raises(ValueError, match="observed"):
        GPVAERegressor(**TINY).fit(X, never)
