"""The residual variogram (geogpvae/plot/variogram.py)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from figure_helpers import _gaussian_case

from geogpvae import plot
from geogpvae.plot.variogram import semivariogram


def _brute_force(x, z, groups, edges):
    nb = len(edges) - 1
    sums, hs, counts = np.zeros(nb), np.zeros(nb), np.zeros(nb)
    for i in range(len(z)):
        for j in range(i + 1, len(z)):
            if groups[i] != groups[j]:
                continue
            h = np.sqrt(np.sum((x[i] - x[j]) ** 2))
            for b in range(nb):
                last = b == nb - 1
                if edges[b] <= h and (h < edges[b + 1] or (last and h == edges[b + 1])):
                    sums[b] += 0.5 * (z[i] - z[j]) ** 2
                    hs[b] += h
                    counts[b] += 1
    with np.errstate(invalid="ignore"):
        return hs / counts, sums / counts, counts


def test_semivariogram_matches_every_pair_counted_by_hand():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, (60, 2))
    x[1] = x[0] + [3.0, 4.0]  # a pair at exactly 5, an inner edge
    z = rng.normal(size=60)
    groups = rng.integers(0, 3, 60)
    groups[1] = groups[0]
    edges = np.linspace(0.0, 7.5, 7)
    lag, gamma, pairs = semivariogram(x, z, groups, edges)
    lag0, gamma0, pairs0 = _brute_force(x, z, groups, edges)
    np.testing.assert_array_equal(pairs, pairs0)
    np.testing.assert_allclose(gamma, gamma0, rtol=1e-12)
    np.testing.assert_allclose(lag, lag0, rtol=1e-12)


def _line(fig, gid):
    ax = next(a for a in fig.axes if a.get_gid() == "residual-variogram")
    return next(ln for ln in ax.lines if ln.get_gid() == gid)


def _sites(z_true, sigma, x, y, flag=None):
    n = len(z_true)
    flag = np.ones(n, dtype=np.int8) if flag is None else flag
    mean = np.zeros(n)
    ds = xr.Dataset(
        {"v": ("site", np.where(flag == 1, mean, z_true), {"units": "mg/kg"}),
         "v_std": ("site", np.where(flag == 1, sigma, 0.0)),
         "v_imputed": ("site", flag)},
        coords={"x": ("site", x, {"units": "km"}), "y": ("site", y, {"units": "km"})},
    )
    return ds, xr.DataArray(z_true, dims="site")


def test_calibrated_independent_errors_are_flat_at_one_and_too_small_std_sits_higher():
    rng = np.random.default_rng(1)
    n = 2500
    x, y = rng.uniform(0, 50, n), rng.uniform(0, 50, n)
    sigma = rng.uniform(0.5, 2.0, n)
    truth = sigma * rng.normal(size=n)
    ds, t = _sites(truth, sigma, x, y)
    fig = plot.residual_variogram(ds, "v", t)
    lag, gamma = _line(fig, "semivariance").get_data()
    assert len(gamma) == 12
    np.testing.assert_allclose(gamma, 1.0, atol=0.08)
    assert lag.max() <= fig.axes[0].get_xlim()[1] + 1e-9
    assert "[km]" in fig.axes[0].get_xlabel()
    # std half the error's: residuals twice as large, semivariance four times
    ds2, _ = _sites(truth, sigma / 2, x, y)
    gamma2 = _line(plot.residual_variogram(ds2, "v", t), "semivariance").get_data()[1]
    np.testing.assert_allclose(gamma2, 4.0, rtol=0.1)
    assert _line(plot.residual_variogram(ds2, "v", t), "mean-square").get_ydata()[0] == pytest.approx(
        4.0, rel=0.08)


def test_spatially_correlated_errors_rise_from_below_one():
    rng = np.random.default_rng(2)
    n = 1500
    x, y = rng.uniform(0, 100, n), rng.uniform(0, 100, n)
    # a smooth error of unit variance: a sum of long-wave cosines with random phases
    k = rng.normal(0, 0.05, (40, 2))
    phase = rng.uniform(0, 2 * np.pi, 40)
    err = np.sqrt(2 / 40) * np.cos(np.c_[x, y] @ k.T + phase).sum(axis=1)
    ds, t = _sites(err, np.ones(n), x, y)
    lag, gamma = _line(plot.residual_variogram(ds, "v", t, bins=10, max_distance=40.0),
                       "semivariance").get_data()
    assert gamma[0] < 0.25 and gamma[-1] > 2 * gamma[0]
    assert lag.max() < 40.0


def test_observed_sites_and_other_dates_do_not_enter_the_pairs():
    # two dates; the residuals differ by date, never by place within a date
    rng = np.random.default_rng(3)
    n = 30
    flag = np.ones((2, n), dtype=np.int8)
    flag[:, :5] = 0
    truth = np.stack([np.full(n, 1.0), np.full(n, -1.0)])
    truth[:, :5] = 50.0  # observed: would dominate if used
    ds = xr.Dataset(
        {"v": (("time", "site"), np.where(flag == 1, 0.0, truth)),
         "v_std": (("time", "site"), np.where(flag == 1, 1.0, 0.0)),
         "v_imputed": (("time", "site"), flag)},
        coords={"x": ("site", rng.uniform(0, 1, n)), "y": ("site", rng.uniform(0, 1, n)),
                "time": np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[ns]")},
    )
    fig = plot.residual_variogram(ds, "v", xr.DataArray(truth, dims=("time", "site")), max_distance=2.0)
    gamma = _line(fig, "semivariance").get_data()[1]
    np.testing.assert_allclose(gamma, 0.0, atol=1e-12)
    counts = next(a for a in fig.axes if a.get_gid() == "pairs")
    assert sum(p.get_height() for p in counts.patches) == 2 * 25 * 24 / 2


def test_longitude_latitude_distances_are_km():
    lon = np.array([0.0, 1.0, 0.0, 1.0])
    lat = np.array([0.0, 0.0, 1.0, 1.0])
    ds = xr.Dataset(
        {"v": ("site", np.zeros(4)), "v_std": ("site", np.ones(4)),
         "v_imputed": ("site", np.ones(4, dtype=np.int8))},
        coords={"lon": ("site", lon, {"units": "degrees_east"}),
                "lat": ("site", lat, {"units": "degrees_north"})},
    )
    fig = plot.residual_variogram(ds, "v", xr.DataArray([1.0, -1.0, 0.5, 0.0], dims="site"),
                                  bins=1, max_distance=120.0)
    lag = _line(fig, "semivariance").get_data()[0]
    # the four sides of a one-degree square near the equator: 111.2 km (chords), diagonals beyond
    assert lag[0] == pytest.approx(111.0, abs=0.5)
    assert "[km]" in fig.axes[0].get_xlabel()


def test_log_variables_use_residuals_of_the_log():
    rng = np.random.default_rng(5)
    n = 2000
    mu, s = rng.normal(2.0, 1.0, n), rng.uniform(0.2, 0.8, n)
    truth = np.exp(mu + s * rng.normal(size=n))
    sd = np.sqrt(np.exp(2 * mu + s**2) * (np.exp(s**2) - 1))
    ds, _ = _sites(truth, sd, rng.uniform(0, 1, n), rng.uniform(0, 1, n))
    ds["v"] = ds.v.copy(data=np.exp(mu)).assign_attrs(geogpvae_transform="log")
    fig = plot.residual_variogram(ds, "v", xr.DataArray(truth, dims="site"))
    np.testing.assert_allclose(_line(fig, "semivariance").get_data()[1], 1.0, atol=0.12)
    assert "of ln" in fig.axes[0].get_title()


def test_bad_calls_are_refused():
    ds, truth = _gaussian_case(n=80)
    ds = ds.assign_coords(x=("cell", np.arange(80.0)))
    with pytest.raises(ValueError, match="truth"):
        plot.residual_variogram(ds, "v", None)
    with pytest.raises(ValueError, match="bins"):
        plot.residual_variogram(ds, "v", truth, bins=0)
    with pytest.raises(ValueError, match="max_distance"):
        plot.residual_variogram(ds, "v", truth, max_distance=-1.0)
    one = ds.assign(v_imputed=ds.v_imputed * 0)
    with pytest.raises(ValueError, match="fewer than two"):
        plot.residual_variogram(one, "v", truth)
    timed = xr.Dataset({"v": ("time", np.zeros(5)), "v_std": ("time", np.ones(5))},
                       coords={"time": np.arange(5).astype("datetime64[D]")})
    with pytest.raises(ValueError, match="no spatial coordinate"):
        plot.residual_variogram(timed, "v", xr.DataArray(np.ones(5), dims="time"))
