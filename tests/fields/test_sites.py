"""Which fields are station networks, and what ``impute`` does with their sites' levels."""

import json

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.datasets.stations import make_station_network
from geogpvae.fields.stacking import prepare_field


def _grid(dims, sizes):
    coords = {d: np.arange(n, dtype=float) for d, n in zip(dims, sizes)}
    if "time" in coords:
        coords["time"] = np.datetime64("2020-01-01") + np.arange(sizes[dims.index("time")]).astype("timedelta64[D]")
    return xr.Dataset({"v": (dims, np.random.default_rng(0).normal(size=sizes))}, coords=coords)


def test_a_time_by_station_field_places_its_sites_by_the_station_coordinates():
    ds = make_station_network(12, 30, seed=0)
    field = prepare_field(ds, ["v0"])
    columns = field.sites
    assert columns is not None
    assert [a.names for a in field.geometry.axes if a.kind != "time"]  # lon/lat: km on the sphere
    # the site columns take one value per station, the others one per day
    assert len(np.unique(field.x[:, list(columns)], axis=0)) == 12
    rest = [c for c in range(field.x.shape[1]) if c not in columns]
    assert len(np.unique(field.x[:, rest], axis=0)) == 30


def test_projected_station_coordinates_count_too():
    ds = xr.Dataset({"v": (("time", "well"), np.ones((5, 3)))},
                    coords={"time": np.datetime64("2020-01-01") + np.arange(5).astype("timedelta64[D]"),
                            "x": ("well", [0.0, 1.0, 3.0]), "y": ("well", [2.0, 0.0, 1.0])})
    assert prepare_field(ds, ["v"]).sites is not None


@pytest.mark.parametrize("dims", [("time", "lat", "lon"), ("time", "x"), ("y", "x")])
def test_grids_are_not_networks(dims):
    ds = _grid(list(dims), [6, 5, 4][: len(dims)])
    assert prepare_field(ds, ["v"]).sites is None


def test_scattered_sites_without_time_are_not_a_network():
    ds = xr.Dataset({"v": ("site", np.arange(6.0))}, coords={"x": ("site", np.arange(6.0)), "y": ("site", np.zeros(6))})
    assert prepare_field(ds, ["v"]).sites is None


def test_impute_fills_a_well_network_at_each_wells_own_level():
    """Wells sampled on a sixth of the dates, far apart in level: the fills follow each well."""
    rng = np.random.default_rng(1)
    n_days, n_wells = 40, 30
    level = rng.normal(50.0, 20.0, size=n_wells)
    truth = level[None, :] + rng.normal(scale=2.0, size=(n_days, n_wells))
    sampled = rng.random(truth.shape) < 0.2
    hidden = sampled & (rng.random(truth.shape) < 0.3)
    ds = xr.Dataset({"chloride": (("time", "well"), np.where(sampled & ~hidden, truth, np.nan), {"units": "mg/l"})},
                    coords={"time": np.datetime64("2020-01-01") + 7 * np.arange(n_days).astype("timedelta64[D]"),
                            "x": ("well", rng.uniform(0, 20, n_wells), {"units": "km"}),
                            "y": ("well", rng.uniform(0, 20, n_wells), {"units": "km"})})
    out = geogpvae.impute(ds, ["chloride"], epochs=10, seed=0, progress=False)
    err = out.chloride.values[hidden] - truth[hidden]
    assert np.sqrt(np.mean(err**2)) < 4.0  # the noise is 2, the levels 20
    seen = sampled & ~hidden
    np.testing.assert_array_equal(out.chloride.values[seen], ds.chloride.values[seen])
    recorded = json.loads(out.attrs["geogpvae_site_levels"])
    assert recorded["sites"] == n_wells and 10 < recorded["sd"]["chloride"] < 30


def test_a_saved_network_model_fills_a_new_file_of_the_same_wells_at_their_levels(tmp_path):
    ds = make_station_network(10, 40, seed=3)
    ds["v0"] = ds.v0 + xr.DataArray(np.linspace(-20, 20, 10), dims="station")  # levels far apart
    imp = geogpvae.GPVAEImputer(epochs=5, seed=0, progress=False).fit(ds, ["v0"])
    path = imp.save(tmp_path / "model.pt")
    again = geogpvae.GPVAEImputer.load(path, progress=False)
    later = ds.isel(time=slice(20, 40))
    a, b = imp.impute(later), again.impute(later)
    np.testing.assert_array_equal(a.v0.values, b.v0.values)
    gap = later.v0.isnull().values
    err = a.v0.values[gap] - (ds.v0.isel(time=slice(20, 40)).mean("time").values[None, :] * np.ones_like(gap))[gap]
    assert np.abs(err).max() < 10  # each well at its own level, 40 apart from one end to the other
