"""The synthetic station network: CF layout, reproducibility, gaps and space-time structure."""

from __future__ import annotations

import numpy as np
import pytest

from geogpvae.datasets import make_station_network


def test_layout_and_cf_attributes():
    ds = make_station_network(12, 50, n_vars=2, names=["tas", "psl"], seed=3)
    assert dict(ds.sizes) == {"time": 50, "station": 12}
    assert ds.tas.dims == ("time", "station") and list(ds.data_vars) == ["tas", "psl"]
    assert ds.lat.dims == ("station",) and ds.lon.dims == ("station",)
    assert ds.lat.attrs["units"] == "degrees_north" and ds.lon.attrs["units"] == "degrees_east"
    assert ds.lat.attrs["standard_name"] == "latitude" and ds.lon.attrs["standard_name"] == "longitude"
    assert ds.time.attrs["standard_name"] == "time" and np.issubdtype(ds.time.dtype, np.datetime64)
    assert (np.diff(ds.time.values) == np.timedelta64(1, "D")).all()
    assert ds.station_name.attrs["cf_role"] == "timeseries_id" and len(set(ds.station_name.values)) == 12
    assert ds.attrs["featureType"] == "timeSeries" and ds.attrs["seed"] == 3
    assert ((ds.lon >= 5) & (ds.lon <= 11)).all() and ((ds.lat >= 45.5) & (ds.lat <= 48.5)).all()


def test_reproducible_and_gaps_hold_the_truth():
    a, ta = make_station_network(10, 60, seed=7, return_truth=True)
    b, tb = make_station_network(10, 60, seed=7, return_truth=True)
    c = make_station_network(10, 60, seed=8)
    np.testing.assert_array_equal(a.v0.values, b.v0.values)
    np.testing.assert_array_equal(ta.v0.values, tb.v0.values)
    assert not np.array_equal(a.lat.values, c.lat.values)
    obs = a.v0.notnull().values
    assert ta.v0.notnull().all() and 0 < (~obs).sum() < obs.size
    np.testing.assert_array_equal(a.v0.values[obs], ta.v0.values[obs])


def test_outages_are_runs_of_days_at_one_station():
    ds = make_station_network(20, 200, missing=0.0, outages=2.0, outage_days=(10, 10), seed=1)
    gaps = ds.v0.isnull().values
    assert gaps.any()
    for s in range(20):
        col = np.concatenate([[False], gaps[:, s], [False]]).astype(int)
        starts, ends = np.flatnonzero(np.diff(col) == 1), np.flatnonzero(np.diff(col) == -1)
        # overlapping outages merge into longer runs, so every run is at least 10 days
        assert all(e - s0 >= 10 for s0, e in zip(starts, ends))


def test_values_are_correlated_in_time_and_across_stations():
    """Lag-1 correlation follows the time scale; near stations agree more than far ones."""
    _, truth = make_station_network(30, 300, time_scale=2.0, space_scale=200.0, noise=0.05, seed=2,
                                    return_truth=True)
    v = truth.v0.values
    lag1 = np.corrcoef(v[1:].ravel(), v[:-1].ravel())[0, 1]
    assert 0.6 < lag1 < 0.95  # Matern-3/2 at 1/2 lengthscale: (1 + sqrt3/2) exp(-sqrt3/2) = 0.78
    lat, lon = np.radians(truth.lat.values), np.radians(truth.lon.values)
    km = 6371 * np.hypot((lon[:, None] - lon) * np.cos(lat.mean()), lat[:, None] - lat)
    corr = np.corrcoef(v.T)
    upper = np.triu_indices(30, 1)
    near, far = km[upper] < 80, km[upper] > 300
    assert corr[upper][near].mean() > corr[upper][far].mean() + 0.3


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="at least 2 stations"):
        make_station_network(1, 10)
    with pytest.raises(ValueError, match="missing"):
        make_station_network(5, 10, missing=1.0)
    with pytest.raises(ValueError, match="outage_days"):
        make_station_network(5, 10, outage_days=(0, 3))
    with pytest.raises(ValueError, match="names"):
        make_station_network(5, 10, n_vars=2, names=["a"])
