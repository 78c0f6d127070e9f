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


def test_grid_predicts_on_a_regular_grid_as_predict_does():
    X, _, y = _field(120)
    reg = GPVAERegressor(**TINY).fit(X, y)
    assert reg.region_ == pytest.approx((X[:, 0].min(), X[:, 0].max(), X[:, 1].min(), X[:, 1].max()))
    out = reg.grid(region=(0, 10, 2, 6), spacing=(1.0, 2.5))
    assert out.sizes == {"northing": 5, "easting": 5}
    np.testing.assert_allclose(out.easting, [0, 2.5, 5, 7.5, 10])
    np.testing.assert_allclose(out.northing, [2, 3, 4, 5, 6])
    assert set(out.data_vars) == {"scalars_0", "scalars_0_std", "scalars_1", "scalars_1_std"}
    ee, nn = np.meshgrid(out.easting.values, out.northing.values)
    mean, std = reg.predict(np.column_stack([ee.ravel(), nn.ravel()]), return_std=True)
    np.testing.assert_allclose(out.scalars_1.values.ravel(), mean[:, 1], rtol=1e-6)
    np.testing.assert_allclose(out.scalars_0_std.values.ravel(), std[:, 0], rtol=1e-6)
    # the data's region by default; a step that does not divide the region is adjusted
    one = GPVAERegressor(**TINY).fit(X, y[:, 0]).grid(spacing=3.0, dims=("y", "x"), data_names=["v"])
    assert set(one.data_vars) == {"v", "v_std"} and one.v.dims == ("y", "x")
    assert one.x.values[0] == pytest.approx(X[:, 0].min()) and one.x.values[-1] == pytest.approx(X[:, 0].max())
    assert one.sizes["x"] == round((X[:, 0].max() - X[:, 0].min()) / 3.0) + 1
    assert reg.grid(shape=(3, 4)).sizes == {"northing": 3, "easting": 4}


def test_grid_refuses_what_it_cannot_lay_out():
    X, _, y = _field(60)
    reg = GPVAERegressor(**TINY).fit(X, y)
    for kwargs, match in [({}, "exactly one"), ({"spacing": 1.0, "shape": (3, 3)}, "exactly one"),
                          ({"spacing": -1.0}, "spacing"), ({"spacing": 100.0}, "fewer than 2 nodes"),
                          ({"shape": (1, 5)}, "shape"), ({"shape": (2.5, 3)}, "shape"),
                          ({"shape": (3, 3), "region": (5, 1, 0, 1)}, "empty"),
                          ({"shape": (3, 3), "region": (0, 1, 0)}, "4 finite"),
                          ({"shape": (3, 3), "data_names": ["a"]}, "data_names"),
                          ({"shape": (3, 3), "dims": ("x", "x")}, "dims")]:
        with pytest.raises(ValueError, match=match):
            reg.grid(**kwargs)
    X3 = np.column_stack([X, X[:, 0]])
    with pytest.raises(ValueError, match="2 coordinates"):
        GPVAERegressor(**TINY).fit(X3, y).grid(spacing=1.0)
