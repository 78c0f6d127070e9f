"""Realisations through the xarray API: exact observed values, reproducible, the predictions'
moments, and the texture the mean lacks."""

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.datasets import make_gaussian_field
from geogpvae.engine.realisations import draw_realisations, simulation_plan


@pytest.fixture(scope="module")
def fitted():
    """A smooth one-variable field with a 16 x 16 hole in a 36 x 36 grid."""
    ds, truth = make_gaussian_field((36, 36), n_vars=1, n_latent=1, lengthscale=0.15, kernel="matern32",
                                    missing=0.05, noise=0.05, nonlinear=0.0, seed=3, return_truth=True)
    hole = np.zeros((36, 36), bool)
    hole[10:26, 10:26] = True
    ds["v0"] = ds.v0.where(~xr.DataArray(hole, dims=ds.v0.dims))
    imp = geogpvae.GPVAEImputer(epochs=60, seed=0, progress=False).fit(ds, ["v0"])
    return ds, truth, hole, imp


def test_every_realisation_keeps_the_observed_values_and_fills_every_hole(fitted):
    ds, _, _, imp = fitted
    out = imp.simulate(ds, 4)
    assert out.v0.dims == ("realization", "y", "x") and out.v0.notnull().all()
    assert out.realization.attrs["standard_name"] == "realization"
    np.testing.assert_array_equal(out.realization.values, [0, 1, 2, 3])
    seen = ds.v0.notnull().values
    for r in range(4):
        np.testing.assert_array_equal(out.v0.values[r][seen], ds.v0.values[seen])
    assert not np.array_equal(out.v0.values[0], out.v0.values[1])
    np.testing.assert_array_equal(out.v0_imputed.values, ~seen)
    assert "v0_std" not in out and "4 joint draws" in out.attrs["geogpvae_realizations"]


def test_the_same_seed_gives_the_same_realisations_however_they_are_grouped(fitted):
    ds, _, _, imp = fitted
    whole = imp.simulate(ds, 5, seed=7)
    part = imp.simulate(ds, 2, seed=7, first=3)
    np.testing.assert_array_equal(part.v0.values, whole.v0.values[3:])
    np.testing.assert_array_equal(part.realization.values, [3, 4])
    assert not np.array_equal(imp.simulate(ds, 1, seed=8).v0.values[0], whole.v0.values[0])


def test_many_realisations_have_the_pointwise_mean_and_spread_of_the_predictions(fitted):
    """Against the predictions with 2,048 latent samples (the default's 64 carry Monte Carlo error of
    their own): the draws' mean within its Monte Carlo error, their spread within 5 %."""
    _, _, _, imp = fitted
    eng = imp.engine_
    draws = draw_realisations(eng, simulation_plan(eng, 1), 400)[..., 0]
    pred = eng.predict(samples=2048)
    gap = ~eng._observed[:, 0]
    z = (draws.mean(0)[gap] - pred.mean[gap, 0]) / (pred.std[gap, 0] / np.sqrt(400))
    # neighbouring cells' errors move together (their draws do), so z is one N(0, 1) per cell, not an average
    assert np.mean(z**2) < 2.0 and np.abs(z).max() < 5
    assert np.mean(draws.std(0)[gap] / pred.std[gap, 0]) == pytest.approx(1.0, abs=0.05)


def semivariance(a, lag):
    return 0.5 * np.mean(np.concatenate([(a[:, lag:] - a[:, :-lag]).ravel() ** 2,
                                         (a[lag:] - a[:-lag]).ravel() ** 2]))


def test_realisations_keep_the_texture_that_the_mean_smooths_away(fitted):
    """Semivariance between neighbouring cells inside the hole: the mean's is a fraction of the true
    field's, the realisations' is of its size (kriging's smoothing effect, and its remedy)."""
    ds, truth, hole, imp = fitted
    block = (slice(10, 26), slice(10, 26))
    mean = imp.impute(ds).v0.values[block]
    sims = imp.simulate(ds, 20).v0.values[:, block[0], block[1]]
    true = truth.v0.values[block]
    for lag in (1, 2):
        ratio_mean = semivariance(mean, lag) / semivariance(true, lag)
        ratio_draws = np.mean([semivariance(s, lag) for s in sims]) / semivariance(true, lag)
        assert ratio_mean < 0.6 and 0.6 < ratio_draws < 2.5


def test_a_bad_count_or_another_field_is_refused_before_any_draw(fitted):
    ds, _, _, imp = fitted
    for n in (0, -1, 2.5, True):
        with pytest.raises(geogpvae.InputError, match="n must be"):
            imp.simulate(ds, n)
    with pytest.raises(geogpvae.InputError, match="first must be"):
        imp.simulate(ds, 1, first=-2)
    other = ds.copy(deep=True)
    other["v0"] = other.v0.where(other.x < 0.5)
    with pytest.raises(geogpvae.InputError, match="fitted on"):
        imp.simulate(other, 2)


def test_simulate_trains_and_draws_in_one_call():
    ds = make_gaussian_field((12, 12), n_vars=2, seed=1)
    out = geogpvae.simulate(ds, 2, ["v0", "v1"], neighbours=6, epochs=3, progress=False)
    assert out.v0.shape == (2, 12, 12) and out.v1.notnull().all()
    assert "simulate(" in out.attrs["history"]


def test_the_accessor_draws_realisations_too():
    ds = make_gaussian_field((10, 10), n_vars=1, seed=2)
    out = ds.gpvae.simulate(2, neighbours=5, epochs=2, progress=False)
    assert out.v0.sizes["realization"] == 2


def test_realisations_write_to_netcdf_and_read_back(tmp_path):
    ds = make_gaussian_field((10, 10), n_vars=1, seed=4)
    out = geogpvae.simulate(ds, 3, neighbours=5, epochs=2, progress=False)
    geogpvae.to_netcdf(out, tmp_path / "sims.nc")
    back = xr.open_dataset(tmp_path / "sims.nc")
    np.testing.assert_array_equal(back.v0.values, out.v0.values)
    assert back.realization.attrs["standard_name"] == "realization"
    back.close()


def cross_semivariance(a, b, lag):
    """Half the mean product of the increments of ``a`` and ``b`` ``lag`` cells apart, along both axes."""
    return 0.5 * np.mean(np.concatenate([((a[:, lag:] - a[:, :-lag]) * (b[:, lag:] - b[:, :-lag])).ravel(),
                                         ((a[lag:] - a[:-lag]) * (b[lag:] - b[:-lag])).ravel()]))


def test_two_correlated_variables_are_drawn_together_with_their_cross_variogram():
    """Two variables of one latent field, a hole in both: inside it the draws' cross-semivariance is of
    the true field's size (the mean's is smaller), and their increments move together as the truth's
    do, far more than those of two realisations drawn apart."""
    ds, truth = make_gaussian_field((36, 36), n_vars=2, n_latent=1, lengthscale=0.15, kernel="matern32",
                                    missing=0.05, noise=0.05, nonlinear=0.0, seed=3, return_truth=True)
    hole = xr.DataArray(np.zeros((36, 36), bool), dims=ds.v0.dims)
    hole[10:26, 10:26] = True
    ds = ds.assign({v: ds[v].where(~hole) for v in ("v0", "v1")})
    imp = geogpvae.GPVAEImputer(epochs=60, seed=0, progress=False).fit(ds)
    block = (slice(10, 26), slice(10, 26))
    true = [truth[v].values[block] for v in ("v0", "v1")]
    mean = [imp.impute(ds)[v].values[block] for v in ("v0", "v1")]
    sims = imp.simulate(ds, 20)
    a, b = (sims[v].values[:, block[0], block[1]] for v in ("v0", "v1"))
    for lag in (1, 2):
        reference = cross_semivariance(*true, lag)
        assert cross_semivariance(*mean, lag) / reference < 0.75
        assert 0.75 < np.mean([cross_semivariance(a[r], b[r], lag) for r in range(20)]) / reference < 2.5

    def codispersion(x, y):
        return cross_semivariance(x, y, 1) / np.sqrt(cross_semivariance(x, x, 1) * cross_semivariance(y, y, 1))

    assert codispersion(*true) > 0.9
    joint = np.mean([codispersion(a[r], b[r]) for r in range(20)])
    apart = np.mean([codispersion(a[r], b[(r + 1) % 20]) for r in range(20)])
    assert joint > 0.6 and joint > apart + 0.25


def test_a_dask_backed_field_gives_the_same_realisations_a_few_at_a_time(fitted, tmp_path, monkeypatch):
    """Lazy realisations: four a chunk, nothing drawn until computed, bit for bit the eager ones,
    and written to NetCDF chunk by chunk with the same values and attributes."""
    import geogpvae.api_simulate as api_simulate

    ds, _, _, imp = fitted
    eager = imp.simulate(ds, 6, seed=5, first=2)
    calls = []
    monkeypatch.setattr(api_simulate, "draw_realisations",
                        lambda *a, **k: calls.append(k["first"]) or draw_realisations(*a, **k))
    lazy = imp.simulate(ds.chunk(), 6, seed=5, first=2)
    assert lazy.v0.chunks[0] == (4, 2) and lazy.v0.dims == eager.v0.dims and not calls
    assert lazy.v0.attrs == eager.v0.attrs
    timed = {"history", "geogpvae_threads"}  # each call's time and machine load
    assert {k: v for k, v in lazy.attrs.items() if k not in timed} == {
        k: v for k, v in eager.attrs.items() if k not in timed}
    np.testing.assert_array_equal(lazy.v0.values, eager.v0.values)
    assert sorted(calls) == [2, 6]  # one draw per chunk
    geogpvae.to_netcdf(lazy, tmp_path / "lazy.nc")
    with xr.open_dataset(tmp_path / "lazy.nc") as back:
        np.testing.assert_array_equal(back.v0.values, eager.v0.values)
        np.testing.assert_array_equal(back.realization.values, np.arange(2, 8))


def test_simulate_on_a_dask_backed_field_is_lazy_too():
    ds = make_gaussian_field((10, 10), n_vars=1, seed=2)
    out = geogpvae.simulate(ds.chunk(), 5, neighbours=5, epochs=2, progress=False, seed=1)
    assert out.v0.chunks[0] == (4, 1)
    eager = geogpvae.simulate(ds, 5, neighbours=5, epochs=2, progress=False, seed=1)
    np.testing.assert_array_equal(out.v0.values, eager.v0.values)
