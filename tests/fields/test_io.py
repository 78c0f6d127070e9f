"""Tests of geogpvae.fields.io: CF-tidy, atomic NetCDF writing and reading.

All NetCDF files are generated here under ``tmp_path``; no data are committed.
"""

from __future__ import annotations

import copy
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from geogpvae.fields import cf, io, labelling

REPO = Path(__file__).resolve().parents[2]


# ============================================================================ fixtures
def _impute(ds: xr.Dataset, name: str, *, transform=None, domain=None, seed=0) -> xr.Dataset:
    """What the xarray layer does: fill holes with something plausible, attach metadata."""
    rng = np.random.default_rng(seed)
    v = ds[name]
    filled = np.where(np.isnan(v.values), np.nanmean(v.values), v.values)
    filled = filled + rng.normal(0.0, 0.1, v.shape)
    std = rng.uniform(0.1, 0.5, v.shape)
    return ds.assign(cf.imputation_variables(name, v, filled, std, domain=domain,
                                             transform=transform))


def _provenance(ds: xr.Dataset, **extra) -> xr.Dataset:
    options = {"engine": "gpvae", "neighbours": 8, "kernel": "matern52", "epochs": 5,
               "seed": 0, "normalise": True, "holdout": None, **extra}
    return labelling.add_provenance(ds, "impute(ds, vars=[...])", options)


def gridded_zyx() -> xr.Dataset:
    """A 3-D (z, y, x) float32 field in a projected CRS, with a domain mask."""
    rng = np.random.default_rng(1)
    nz, ny, nx = 3, 6, 7
    perm = np.exp(rng.normal(-27.0, 1.0, (nz, ny, nx))).astype(np.float32)
    perm[rng.random(perm.shape) < 0.3] = np.nan
    domain = np.ones(perm.shape, dtype=bool)
    domain[:, 0, :2] = False  # a corner outside the reservoir
    perm[:, 0, :2] = np.nan
    ds = xr.Dataset(
        {
            "perm": (("z", "y", "x"), perm,
                     {"units": "m2", "long_name": "permeability", "grid_mapping": "crs"}),
            "poro": (("z", "y", "x"), rng.uniform(0.05, 0.3, perm.shape),
                     {"units": "1", "long_name": "porosity", "grid_mapping": "crs"}),
            "crs": ((), np.int32(0), {
                "grid_mapping_name": "transverse_mercator",
                "scale_factor_at_central_meridian": 0.9996,
                "longitude_of_central_meridian": 9.0,
                "latitude_of_projection_origin": 0.0,
                "false_easting": 500000.0, "false_northing": 0.0}),
        },
        coords={
            "z": ("z", np.array([0.5, 1.5, 2.5]),
                  {"units": "m", "positive": "down", "axis": "Z", "standard_name": "depth",
                   "long_name": "depth below top of reservoir"}),
            "y": ("y", 5.2e6 + 20.0 * np.arange(ny),
                  {"units": "m", "axis": "Y", "standard_name": "projection_y_coordinate",
                   "long_name": "northing"}),
            "x": ("x", 4.8e5 + 20.0 * np.arange(nx),
                  {"units": "m", "axis": "X", "standard_name": "projection_x_coordinate",
                   "long_name": "easting"}),
        },
        attrs={"title": "synthetic reservoir", "history": "2024-01-01T00:00:00Z: made by test",
               "Conventions": "CF-1.6"},
    )
    return _provenance(_impute(ds, "perm", transform="log", domain=domain))


def gridded_time_lat_lon() -> xr.Dataset:
    """(time, lat, lon) with descending latitude and a CF time axis."""
    rng = np.random.default_rng(2)
    time_ = pd.date_range("2021-06-01", periods=5, freq="6h")
    lat = np.linspace(60.0, 45.0, 8)  # descending, as in many reanalyses
    lon = np.linspace(-5.0, 12.5, 9)
    tas = (285.0 + rng.normal(0.0, 3.0, (5, 8, 9))).astype(np.float32)
    tas[rng.random(tas.shape) < 0.25] = np.nan
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), tas,
                 {"units": "K", "standard_name": "air_temperature",
                  "long_name": "near-surface air temperature"})},
        coords={
            "time": ("time", time_, {"standard_name": "time", "long_name": "time",
                                     "axis": "T"}),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude",
                                 "long_name": "latitude", "axis": "Y"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude",
                                 "long_name": "longitude", "axis": "X"}),
        },
        attrs={"title": "gridded temperature", "Conventions": "CF-1.8, ACDD-1.3",
               "summary": "test data", "history": "2024-02-02T00:00:00Z: made by test"},
    )
    ds["time"].encoding.update(units="hours since 2000-01-01 00:00:00", calendar="standard")
    return _provenance(_impute(ds, "tas"))


def scattered() -> xr.Dataset:
    """Scattered sites with x, y and a string ``split`` coordinate."""
    rng = np.random.default_rng(3)
    n = 40
    cd = rng.lognormal(0.0, 0.8, n)
    cd[rng.random(n) < 0.3] = np.nan
    ds = xr.Dataset(
        {"Cd": ("site", cd, {"units": "mg kg-1", "long_name": "cadmium concentration"}),
         "rock": ("site", rng.integers(1, 5, n).astype(np.int16),
                  {"long_name": "rock type code", "units": "1"})},
        coords={
            "x": ("site", rng.uniform(0.0, 5.0, n), {"units": "km", "long_name": "easting"}),
            "y": ("site", rng.uniform(0.0, 6.0, n), {"units": "km", "long_name": "northing"}),
            "split": ("site", np.where(np.arange(n) % 4 == 0, "validation", "prediction"),
                      {"long_name": "data split"}),
        },
        attrs={"title": "Jura-like sites", "history": "2024-03-03T00:00:00Z: made by test"},
    )
    return _provenance(_impute(ds, "Cd", transform="log"))


CASES = {"zyx": gridded_zyx, "time_lat_lon": gridded_time_lat_lon, "scattered": scattered}


def _expected(ds: xr.Dataset, conventions: str) -> xr.Dataset:
    return ds.assign_attrs(Conventions=conventions)


def _conventions_of(case: str) -> str:
    return {"zyx": "CF-1.8", "time_lat_lon": "CF-1.8 ACDD-1.3", "scattered": "CF-1.8"}[case]


# ============================================================================ round trips
@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
@pytest.mark.parametrize("case", list(CASES))
def test_round_trip_identical(case, engine, tmp_path):
    ds = CASES[case]()
    path = io.to_netcdf(ds, tmp_path / "out.nc", engine=engine)
    assert path == tmp_path / "out.nc"
    with io.open_dataset(path) as back:
        xr.testing.assert_identical(back.load(), _expected(ds, _conventions_of(case)))
        for name, var in ds.variables.items():
            if var.dtype.kind == "M":  # the resolution (s/us/ns) is xarray's decoding choice
                assert back[name].dtype.kind == "M", name
            else:
                assert back[name].dtype == var.dtype, name
        assert list(back.dims) == list(ds.dims)
        for name in ds.data_vars:
            assert back[name].dims == ds[name].dims


def test_float32_stays_float32_and_observed_bits_exact(tmp_path):
    ds = gridded_time_lat_lon()
    io.to_netcdf(ds, tmp_path / "t.nc")
    with xr.open_dataset(tmp_path / "t.nc") as back:
        assert back["tas"].dtype == np.float32 and back["tas_std"].dtype == np.float32
        np.testing.assert_array_equal(back["tas"].values.view(np.uint32),
                                      ds["tas"].values.view(np.uint32))


def test_half_precision_written_as_float32_exactly(tmp_path):
    # netCDF has no float16: an imputed half-precision field is stored as float32, every
    # value (NaN gaps included) exactly, rather than failing at the write
    ds = gridded_time_lat_lon()
    half = ds.assign(tas=ds.tas.astype(np.float16), tas_std=ds.tas_std.astype(np.float16))
    io.to_netcdf(half, tmp_path / "h.nc")
    with xr.open_dataset(tmp_path / "h.nc") as back:
        assert back["tas"].dtype == np.float32 and back["tas_std"].dtype == np.float32
        np.testing.assert_array_equal(back["tas"].values, half["tas"].values.astype(np.float32))
    assert half.tas.dtype == np.float16  # the input keeps its dtype


def test_descending_lat_and_time_preserved(tmp_path):
    ds = gridded_time_lat_lon()
    io.to_netcdf(ds, tmp_path / "t.nc")
    with xr.open_dataset(tmp_path / "t.nc") as back:
        assert np.all(np.diff(back["lat"].values) < 0)
        np.testing.assert_array_equal(back["time"].values, ds["time"].values)
        # xarray writes the reference time in its short form ("00:00:00" dropped)
        assert back["time"].encoding["units"] == "hours since 2000-01-01"
        assert back["time"].encoding["calendar"] == "standard"
    with netCDF4.Dataset(tmp_path / "t.nc") as nc:
        # int32 on disk: CF-1.8 has no 64-bit integers
        assert nc["time"].dtype == np.int32
        assert nc["time"][:].tolist() == [187728 + 6 * i for i in range(5)]


def test_flag_round_trip_with_fill_cells(tmp_path):
    ds = gridded_zyx()
    flag = ds["perm_imputed"].values
    assert (flag == -127).any() and (flag == 0).any() and (flag == 1).any()
    io.to_netcdf(ds, tmp_path / "z.nc")
    # raw on disk: int8, no fill value, flag_values int8 naming -127 too
    with netCDF4.Dataset(tmp_path / "z.nc") as nc:
        var = nc["perm_imputed"]
        var.set_auto_mask(False)
        assert var.dtype == np.int8 and "_FillValue" not in var.ncattrs()
        assert var.flag_values.dtype == np.int8 and var.flag_values.tolist() == [0, 1, -127]
        assert var.flag_meanings == "observed imputed no_value"
        np.testing.assert_array_equal(var[:], flag)
    # plain xarray reads the flags back as they were: int8, -127 where there is no value
    with xr.open_dataset(tmp_path / "z.nc") as plain:
        assert plain["perm_imputed"].dtype == np.int8
        np.testing.assert_array_equal(plain["perm_imputed"].values, flag)
    with xr.open_dataset(tmp_path / "z.nc", mask_and_scale=False) as raw:
        assert raw["perm_imputed"].dtype == np.int8
        np.testing.assert_array_equal(raw["perm_imputed"].values, flag)
    with io.open_dataset(tmp_path / "z.nc") as back:
        assert back["perm_imputed"].dtype == np.int8
        np.testing.assert_array_equal(back["perm_imputed"].values, flag)
        # and a second write/read is still exact
        io.to_netcdf(back, tmp_path / "z2.nc")
    with io.open_dataset(tmp_path / "z2.nc") as again:
        xr.testing.assert_identical(again.load(), _expected(ds, "CF-1.8"))


def test_flag_round_trip_of_plainly_decoded_dataset(tmp_path):
    """A dataset read with plain xarray (flag as float32/NaN) is written back as int8/-127."""
    ds = gridded_zyx()
    io.to_netcdf(ds, tmp_path / "a.nc")
    with xr.open_dataset(tmp_path / "a.nc") as plain:
        io.to_netcdf(plain, tmp_path / "b.nc")
    with netCDF4.Dataset(tmp_path / "b.nc") as nc:
        nc.set_auto_mask(False)
        assert nc["perm_imputed"].dtype == np.int8
        np.testing.assert_array_equal(nc["perm_imputed"][:], ds["perm_imputed"].values)


def test_chunk_shapes_of_the_input_are_kept_and_encoding_overrides(tmp_path):
    ds = gridded_zyx()
    ds.to_netcdf(tmp_path / "in.nc", encoding={"perm": {"chunksizes": (1, 3, 2), "zlib": True}})
    with xr.open_dataset(tmp_path / "in.nc") as read:
        io.to_netcdf(read, tmp_path / "kept.nc")
        io.to_netcdf(read, tmp_path / "given.nc", encoding={"perm": {"chunksizes": (2, 2, 2), "complevel": 9}})
        with pytest.raises(ValueError, match="encoding names kx, which the Dataset does not hold"):
            io.to_netcdf(read, tmp_path / "bad.nc", encoding={"kx": {"complevel": 9}})
        with pytest.raises(TypeError, match="encoding must map variable names to dicts"):
            io.to_netcdf(read, tmp_path / "bad.nc", encoding={"perm": 9})
    assert not (tmp_path / "bad.nc").exists()
    with netCDF4.Dataset(tmp_path / "kept.nc") as nc:
        assert nc["perm"].chunking() == [1, 3, 2]
    with netCDF4.Dataset(tmp_path / "given.nc") as nc:
        assert nc["perm"].chunking() == [2, 2, 2] and nc["perm"].filters()["complevel"] == 9
    with io.open_dataset(tmp_path / "given.nc") as back:  # values unchanged by either
        xr.testing.assert_identical(back.load(), _expected(ds, "CF-1.8"))


def test_impute_outputs_keep_the_input_chunks_and_read_back_with_plain_xarray(tmp_path):
    from geogpvae import impute
    from geogpvae.datasets import make_gaussian_field

    ds = make_gaussian_field((12, 10), n_vars=2, missing=0.3, seed=1)
    ds.to_netcdf(tmp_path / "in.nc", encoding={"v0": {"chunksizes": (4, 5), "zlib": True}})
    with xr.open_dataset(tmp_path / "in.nc") as read:
        out = impute(read, ["v0", "v1"], neighbours=6, epochs=2, progress=False)
    io.to_netcdf(out, tmp_path / "out.nc")
    with netCDF4.Dataset(tmp_path / "out.nc") as nc:
        assert [nc[n].chunking() for n in ("v0", "v0_std", "v0_imputed")] == [[4, 5]] * 3
    with xr.open_dataset(tmp_path / "out.nc") as plain:
        for name in ("v0", "v1"):
            assert plain[f"{name}_imputed"].dtype == np.int8
            np.testing.assert_array_equal(plain[f"{name}_imputed"].values, out[f"{name}_imputed"].values)


def test_file_layout(tmp_path):
    ds = scattered()
    io.to_netcdf(ds, tmp_path / "s.nc", complevel=6)
    with netCDF4.Dataset(tmp_path / "s.nc") as nc:
        assert nc.data_model == "NETCDF4"
        assert nc.Conventions == "CF-1.8"
        for name in ("Cd", "Cd_std", "Cd_imputed", "rock"):
            filters = nc[name].filters()
            assert filters["zlib"] and filters["shuffle"] and filters["complevel"] == 6, name
        for name in ("Cd", "Cd_std"):
            assert np.isnan(nc[name]._FillValue)
        for name in ("x", "y", "split"):  # coordinates: no fill value
            assert "_FillValue" not in nc[name].ncattrs(), name
        assert "_FillValue" not in nc["rock"].ncattrs()
        assert nc["split"].dtype is str
        assert sorted(set(nc["split"][:])) == ["prediction", "validation"]
        assert nc["Cd"].ancillary_variables == "Cd_std Cd_imputed"
        assert nc["Cd"].geogpvae_transform == "log"
        assert set(nc["Cd"].coordinates.split()) == {"x", "y", "split"}
        assert nc.geogpvae_normalise == 1 and nc.geogpvae_holdout == "null"
        assert nc.history.splitlines()[1] == "2024-03-03T00:00:00Z: made by test"


def test_chunk_sizes_are_bounded(tmp_path):
    big = xr.Dataset({"v": (("t", "y", "x"), np.zeros((20, 300, 400), dtype=np.float32))})
    io.to_netcdf(big, tmp_path / "b.nc", complevel=1)
    with netCDF4.Dataset(tmp_path / "b.nc") as nc:
        chunks = nc["v"].chunking()
        assert chunks == [2, 300, 400]
        assert np.prod(chunks) * 4 <= 1 << 20


def test_uncompressed(tmp_path):
    io.to_netcdf(scattered(), tmp_path / "s.nc", complevel=0)
    with netCDF4.Dataset(tmp_path / "s.nc") as nc:
        assert not nc["Cd"].filters()["zlib"]


@pytest.mark.parametrize("bad", [-1, 10, 2.5, True])
def test_bad_complevel(bad, tmp_path):
    with pytest.raises(ValueError, match="complevel"):
        io.to_netcdf(scattered(), tmp_path / "s.nc", complevel=bad)
    assert list(tmp_path.iterdir()) == []


def test_packed_variable_kept_packed(tmp_path):
    temp = np.array([[10.0, np.nan], [12.5, 13.25]])
    ds = xr.Dataset({"t": (("y", "x"), temp, {"units": "degC", "long_name": "t"})})
    ds["t"].encoding = {"dtype": "int16", "scale_factor": 0.25, "_FillValue": np.int16(-32767)}
    io.to_netcdf(ds, tmp_path / "p.nc")
    with netCDF4.Dataset(tmp_path / "p.nc") as nc:
        assert nc["t"].dtype == np.int16 and nc["t"]._FillValue == -32767
    with xr.open_dataset(tmp_path / "p.nc") as back:
        np.testing.assert_array_equal(back["t"].values, temp)


@pytest.mark.parametrize(
    "given, expected",
    [
        (None, "CF-1.8"),
        ("CF-1.6", "CF-1.8"),
        ("CF-1.8", "CF-1.8"),
        ("CF-1.10", "CF-1.10"),
        ("CF-1.11 ACDD-1.3", "CF-1.11 ACDD-1.3"),
        ("CF-1.6, ACDD-1.3", "CF-1.8 ACDD-1.3"),
        ("ACDD-1.3", "CF-1.8 ACDD-1.3"),
        ("COARDS, Some Convention 2", "CF-1.8, COARDS, Some Convention 2"),
    ],
)
def test_conventions(given, expected, tmp_path):
    ds = xr.Dataset({"v": ("i", [1.0])})
    if given is not None:
        ds.attrs["Conventions"] = given
    io.to_netcdf(ds, tmp_path / "c.nc")
    with netCDF4.Dataset(tmp_path / "c.nc") as nc:
        assert nc.Conventions == expected


def test_64bit_integers_declare_cf_1_9(tmp_path):
    ds = xr.Dataset({"n": ("site", np.arange(3, dtype=np.int64), {"long_name": "count"})},
                    attrs={"Conventions": "CF-1.8"})
    io.to_netcdf(ds, tmp_path / "n.nc")
    with netCDF4.Dataset(tmp_path / "n.nc") as nc:
        assert nc["n"].dtype == np.int64  # the dtype is kept ...
        assert nc.Conventions == "CF-1.9"  # ... and the first CF version allowing it declared


def test_attributes_netcdf_cannot_hold(tmp_path):
    ds = xr.Dataset({"v": ("i", [1.0], {"flag": True, "none": None, "d": {"a": 1}})},
                    attrs={"ok": False, "gone": None})
    before = copy.deepcopy(ds.attrs), copy.deepcopy(ds["v"].attrs)
    io.to_netcdf(ds, tmp_path / "a.nc")
    assert (ds.attrs, ds["v"].attrs) == before
    with netCDF4.Dataset(tmp_path / "a.nc") as nc:
        assert nc.ok == 0 and "gone" not in nc.ncattrs()
        assert nc["v"].flag == 1 and "none" not in nc["v"].ncattrs()
        assert json.loads(nc["v"].d) == {"a": 1}


def test_object_variable_of_non_strings_refused(tmp_path):
    ds = xr.Dataset({"o": ("i", np.array([{"a": 1}, 2], dtype=object))})
    with pytest.raises(TypeError, match="'o'"):
        io.to_netcdf(ds, tmp_path / "o.nc")
    assert list(tmp_path.iterdir()) == []


def test_cftime_calendar(tmp_path):
    times = xr.date_range("2000-01-01", periods=3, freq="D", calendar="noleap",
                          use_cftime=True)
    ds = xr.Dataset({"v": ("time", [1.0, 2.0, 3.0], {"long_name": "v", "units": "m"})},
                    coords={"time": ("time", times, {"standard_name": "time"})})
    io.to_netcdf(ds, tmp_path / "c.nc")
    with netCDF4.Dataset(tmp_path / "c.nc") as nc:
        assert nc["time"].calendar == "noleap" and nc["time"].dtype == np.int32
    coder = xr.coders.CFDatetimeCoder(use_cftime=True)
    with xr.open_dataset(tmp_path / "c.nc", decode_times=coder) as back:
        assert list(back["time"].values) == list(times)


def test_to_netcdf_does_not_modify_input(tmp_path):
    ds = gridded_time_lat_lon()
    snapshot = ds.copy(deep=True)
    encodings = {k: copy.deepcopy(v.encoding) for k, v in ds.variables.items()}
    attrs = copy.deepcopy(ds.attrs)
    io.to_netcdf(ds, tmp_path / "t.nc")
    xr.testing.assert_identical(ds, snapshot)
    assert ds.attrs == attrs
    for k, v in ds.variables.items():
        assert v.encoding.keys() == encodings[k].keys(), k


# ============================================================================ refusing
def test_refuses_existing_target(tmp_path):
    target = tmp_path / "out.nc"
    target.write_bytes(b"precious")
    with pytest.raises(FileExistsError) as err:
        io.to_netcdf(scattered(), target)
    assert str(target) in str(err.value) and "overwrite=True" in str(err.value)
    assert target.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.nc"]


def test_overwrite_replaces(tmp_path):
    target = tmp_path / "out.nc"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    io.to_netcdf(scattered(), target, overwrite=True)
    with io.open_dataset(target) as back:
        assert "Cd_std" in back
    assert (target.stat().st_mode & 0o777) == 0o640  # permissions of the replaced file kept


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        io.to_netcdf(scattered(), tmp_path / "nope" / "out.nc")
    assert not (tmp_path / "nope").exists()


def test_target_is_a_folder(tmp_path):
    (tmp_path / "d.nc").mkdir()
    with pytest.raises(IsADirectoryError):
        io.to_netcdf(scattered(), tmp_path / "d.nc", overwrite=True)


def test_links_pipes_and_devices_are_never_replaced(tmp_path):
    # --overwrite replaces a regular file; a symbolic link, a named pipe or a device would be
    # turned into a regular file (the link's target left as it was): refused, nothing changed
    target = tmp_path / "real.nc"
    target.write_bytes(b"old")
    link = tmp_path / "link.nc"
    link.symlink_to(target)
    with pytest.raises(FileExistsError, match=r"link.nc: it is a symbolic link \(to .*real.nc\)"):
        io.to_netcdf(scattered(), link, overwrite=True)
    assert link.is_symlink() and target.read_bytes() == b"old"
    fifo = tmp_path / "pipe.nc"
    os.mkfifo(fifo)
    with pytest.raises(FileExistsError, match="pipe.nc: it is not a regular file"):
        io.to_netcdf(scattered(), fifo, overwrite=True)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.nc", "pipe.nc", "real.nc"]


# ============================================================================ atomicity
def _failing_writer(exc):
    def write(ds, tmp, engine):
        # the temporary file exists and gets partly written before the failure
        assert Path(tmp).exists() and Path(tmp).parent.name.startswith(".out.nc.")  # in a hidden staging folder
        Path(tmp).write_bytes(b"\x89HDF\r\n\x1a\npartial")
        raise exc
    return write


@pytest.mark.parametrize("exc", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_failed_write_leaves_nothing(exc, tmp_path, monkeypatch):
    monkeypatch.setattr(io, "_write_netcdf", _failing_writer(exc))
    with pytest.raises(type(exc)):
        io.to_netcdf(scattered(), tmp_path / "out.nc")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("exc", [OSError("no space left"), KeyboardInterrupt()])
def test_failed_overwrite_keeps_old_file(exc, tmp_path, monkeypatch):
    target = tmp_path / "out.nc"
    io.to_netcdf(gridded_zyx(), target)
    old = target.read_bytes()
    monkeypatch.setattr(io, "_write_netcdf", _failing_writer(exc))
    with pytest.raises(type(exc)):
        io.to_netcdf(scattered(), target, overwrite=True)
    assert target.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.nc"]


@pytest.mark.parametrize("step", ["replace", "link"])
def test_failure_in_fsync_or_replace_cleans_up(tmp_path, monkeypatch, step):
    def boom(*args, **kwargs):
        raise OSError("replace failed")
    monkeypatch.setattr(io.os, step, boom)  # link: new target, replace: overwrite
    target = tmp_path / "out.nc"
    if step == "replace":
        target.write_bytes(b"old")
    with pytest.raises(OSError, match="replace failed"):
        io.to_netcdf(scattered(), target, overwrite=step == "replace")
    assert [p.name for p in tmp_path.iterdir()] == ([] if step == "link" else ["out.nc"])


@pytest.mark.parametrize("chunks", [None, {}])
def test_overwrite_own_source(chunks, tmp_path):
    """Writing over the file the (lazy) Dataset is read from gives a correct file."""
    target = tmp_path / "src.nc"
    original = gridded_zyx()
    io.to_netcdf(original, target)
    src = io.open_dataset(target, chunks=chunks)
    assert Path(src.encoding["source"]) == target
    assert not src["poro"].variable._in_memory  # still to be read from the file
    changed = src.assign(perm_std=src["perm_std"] * 2).assign_attrs(note="second pass")
    io.to_netcdf(changed, target, overwrite=True)
    src.close()

    expected = original.assign(perm_std=original["perm_std"] * 2).assign_attrs(
        note="second pass", Conventions="CF-1.8")
    with io.open_dataset(target) as back:
        xr.testing.assert_identical(back.load(), expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.nc"]


_KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import dask.array as da
    import numpy as np
    import xarray as xr
    from geogpvae.fields import io

    target = sys.argv[1]
    n = 16

    def slow(block, block_info=None):
        # the last block stalls, so the kill lands in the middle of the write
        if block_info[None]["chunk-location"][0] == n - 1:
            print("STALLING", flush=True)
            time.sleep(120)
        return block

    data = da.random.random((n, 128, 128), chunks=(1, 128, 128)).map_blocks(
        slow, dtype=float)
    ds = xr.Dataset({"v": (("t", "y", "x"), data)})
    io.to_netcdf(ds, target, overwrite=True)
    print("DONE", flush=True)
    """
)


@pytest.mark.parametrize("existing", [False, True])
def test_sigkill_during_write_leaves_no_partial_target(existing, tmp_path):
    target = tmp_path / "out.nc"
    if existing:
        io.to_netcdf(scattered(), target)
        old = target.read_bytes()
    script = tmp_path / "writer.py"
    script.write_text(_KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(script), str(target)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # wait until the writer has created its temporary file and stalls; the limit only
        # guards against a hang (a loaded machine may take minutes to start the subprocess)
        deadline = time.monotonic() + 600
        line = ""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
                if line.strip() == "STALLING" or not line:
                    break
        assert line.strip() == "STALLING", f"writer did not stall: {proc.stderr.read()}"
        temps = list(tmp_path.glob(".out.nc.*.tmp"))
        assert len(temps) == 1
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    if existing:
        assert target.read_bytes() == old
    else:
        assert not target.exists()
    # A killed process cannot clean up: only its hidden temporary file is left.
    assert [p.name for p in tmp_path.glob(".out.nc.*.tmp")] == [temps[0].name]


# ============================================================================ reading
def _write_times(tmp_path, n_files=3, start=0):
    paths = []
    for i in range(n_files):
        t = pd.date_range("2020-01-01", periods=2, freq="D") + pd.Timedelta(days=2 * (i + start))
        ds = xr.Dataset(
            {"v": (("time", "y"), np.full((2, 3), float(i)), {"units": "m", "long_name": "v"})},
            coords={"time": t, "y": [0.0, 1.0, 2.0]},
        )
        paths.append(io.to_netcdf(ds, tmp_path / f"part{i}.nc"))
    return paths


def test_open_single_file_is_lazy_without_dask(tmp_path):
    path = io.to_netcdf(scattered(), tmp_path / "s.nc")
    with io.open_dataset(path) as ds:
        assert ds["Cd"].chunks is None
        assert not ds["Cd_std"].variable._in_memory
    with io.open_dataset(str(path), chunks={}) as ds:
        assert ds["Cd"].chunks is not None


def test_open_dataset_close_releases_the_file(tmp_path, monkeypatch):
    path = io.to_netcdf(gridded_zyx(), tmp_path / "z.nc")
    closed = []
    ds = io.open_dataset(path)
    inner = ds._close
    assert inner is not None
    monkeypatch.setattr(ds, "_close", lambda: (closed.append(True), inner())[1])
    ds.close()
    assert closed == [True]


def test_new_file_permissions_follow_umask(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    path = io.to_netcdf(scattered(), tmp_path / "s.nc")
    assert (path.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_open_glob_by_coords(tmp_path):
    _write_times(tmp_path)
    with io.open_dataset(tmp_path / "part*.nc") as ds:
        assert ds.sizes["time"] == 6 and ds["v"].chunks is not None
        assert ds["v"].values[:, 0].tolist() == [0, 0, 1, 1, 2, 2]
        assert ds.time.to_index().is_monotonic_increasing


def test_open_list_nested_along_new_dim(tmp_path):
    a, b = _write_times(tmp_path, 2)
    # same grid, different times: nested along a new "member" dim needs equal indexes
    with io.open_dataset([a, a], concat_dim="member") as ds:
        assert ds["v"].dims == ("member", "time", "y") and ds.sizes["member"] == 2
    with pytest.warns(UserWarning, match="not in order"), io.open_dataset([b, a], concat_dim="time") as ds:
        assert ds["v"].values[:, 0].tolist() == [1, 1, 0, 0]  # given order kept


def test_open_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no file matches the pattern .*nothing\*\.nc"):
        io.open_dataset(tmp_path / "nothing*.nc")
    with pytest.raises(FileNotFoundError, match="missing.nc"):
        io.open_dataset(tmp_path / "missing.nc")
    text = tmp_path / "notes.nc"
    text.write_text("this is not netcdf\n")
    good = _write_times(tmp_path, 1)[0]
    with pytest.raises(ValueError, match="notes.nc is not a NetCDF file"):
        io.open_dataset(text)
    with pytest.raises(ValueError, match="notes.nc is not a NetCDF file"):
        io.open_dataset([good, text], concat_dim="time")
    with pytest.raises(ValueError, match="no paths"):
        io.open_dataset([])


def test_open_netcdf3(tmp_path):
    path = tmp_path / "classic.nc"
    xr.Dataset({"v": ("i", [1.0, 2.0])}).to_netcdf(path, format="NETCDF3_CLASSIC")
    with io.open_dataset(path) as ds:
        assert ds["v"].values.tolist() == [1.0, 2.0]


# ============================================================================ CF checks
@pytest.fixture(scope="module")
def cf_suite():
    pytest.importorskip("compliance_checker")
    from compliance_checker.suite import CheckSuite

    with warnings.catch_warnings():  # the deprecated ioos_sos checker announces itself
        warnings.simplefilter("ignore", DeprecationWarning)
        CheckSuite.load_all_available_checkers()
    assert {"cf", "cf:1.8", "cf:1.9"} <= set(CheckSuite.checkers)
    return CheckSuite


@pytest.fixture
def offline(monkeypatch):
    """Make any network access fail loudly: the checker must work from bundled data."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[:2]}")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.delenv("CF_STANDARD_NAME_TABLE", raising=False)


def _failures(results, weight=None):
    """(weight, name, messages) of every scored result that lost points."""
    out = []

    def walk(items):
        for r in items:
            if r.value is not None and r.value[0] < r.value[1] and (
                    weight is None or r.weight == weight):
                out.append((r.weight, r.name, r.msgs))
            walk(r.children)
    walk(results)
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_cf_compliance(case, tmp_path, cf_suite, offline):
    from compliance_checker.runner import ComplianceChecker

    path = io.to_netcdf(CASES[case](), tmp_path / f"{case}.nc")
    with netCDF4.Dataset(path) as nc:
        # Without this attribute the checker uses its bundled standard-name table; with a
        # version other than the bundled one it would try to download that table.
        assert "standard_name_vocabulary" not in nc.ncattrs()

    cs = cf_suite()
    nc = cs.load_dataset(str(path))
    try:
        for checker in ("cf", "cf:1.8"):
            results = cs.run_all(nc, [checker], skip_checks=[])
            assert len(results) == 1
            (_, (groups, errors)), = results.items()
            assert errors == {}, f"{checker}: checks crashed: {errors}"
            assert groups, checker
            high = _failures(groups, weight=3)
            assert high == [], f"{checker}: high-priority failures: {high}"
            if checker == "cf:1.8":
                # the version the file declares: no recommendation missed either
                assert _failures(groups) == []
            else:
                # "cf" is the newest version the checker knows (CF-1.11). Files declaring
                # CF-1.8 are expected to fail only the medium "Conventions does not contain
                # CF-1.11" test and CF-1.11's new units_metadata recommendations.
                for w, title, msgs in _failures(groups):
                    assert w < 3
                    assert all("CF-1.11" in m or "units_metadata" in m for m in msgs), msgs
    finally:
        nc.close()

    # The runner's JSON report says the same: no high-priority failures.
    report = tmp_path / "report.json"
    passed, crashed = ComplianceChecker.run_checker(
        str(path), ["cf:1.8"], verbose=0, criteria="lenient", output_filename=str(report),
        output_format="json")
    data = json.loads(report.read_text())
    assert passed and not crashed
    assert data["cf:1.8"]["high_count"] == 0 and data["cf:1.8"]["medium_count"] == 0
    assert data["cf:1.8"]["scored_points"] == data["cf:1.8"]["possible_points"]


def test_cf_compliance_cf19_with_int64(tmp_path, cf_suite, offline):
    ds = scattered().assign_coords(site=("site", np.arange(40, dtype=np.int64),
                                         {"long_name": "site number"}))
    path = io.to_netcdf(ds, tmp_path / "s64.nc")
    cs = cf_suite()
    nc = cs.load_dataset(str(path))
    try:
        assert nc.Conventions == "CF-1.9"
        (_, (groups, errors)), = cs.run_all(nc, ["cf:1.9"], skip_checks=[]).items()
        assert errors == {} and _failures(groups) == []
    finally:
        nc.close()


def test_ncdump_reads_header(tmp_path):
    ncdump = shutil.which("ncdump")
    if ncdump is None:
        pytest.skip("ncdump not on PATH (Debian/Ubuntu: apt-get install netcdf-bin)")
    path = io.to_netcdf(scattered(), tmp_path / "s.nc")
    res = subprocess.run([ncdump, "-h", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert "byte Cd_imputed(site)" in res.stdout
    assert "Cd_imputed:flag_values = 0b, 1b, -127b" in res.stdout
    assert "string split(site)" in res.stdout
    assert ':Conventions = "CF-1.8"' in res.stdout
    full = subprocess.run([ncdump, str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert full.returncode == 0, full.stderr  # the compressed data decode too
    assert '"validation"' in full.stdout and " Cd_imputed = " in full.stdout


def test_offline_guard_blocks_network(offline):
    """The guard used by the CF tests really stops a download attempt."""
    requests = pytest.importorskip("requests")
    with pytest.raises(AssertionError, match="network access attempted"):
        requests.get("https://github.com/cf-convention", timeout=5)
