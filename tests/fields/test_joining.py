"""Tests of geogpvae.fields.joining: several files become one field only when they agree."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

from geogpvae.errors import InputError
from geogpvae.fields import io


def _network(times: np.ndarray) -> xr.Dataset:
    """A (time, station) network; x/y on the station dim, no station index."""
    x, y = np.arange(6.0) * 1.5, np.arange(6.0) ** 1.2
    value = 10 * x[None, :] + times[:, None]
    return xr.Dataset({"temperature": (("time", "station"), value), "elevation": ("station", 100 + x)},
                      coords={"time": times, "x": ("station", x), "y": ("station", y)})


def _write(tmp_path, parts: dict[str, xr.Dataset]) -> list[str]:
    paths = []
    for name, ds in parts.items():
        ds.to_netcdf(tmp_path / name)
        paths.append(str(tmp_path / name))
    return paths


@pytest.mark.parametrize("concat_dim", ["time", None, "member"])
def test_stations_stored_in_another_order_are_refused(tmp_path, concat_dim):
    """The join used to keep the first file's x/y: every later value at the wrong station."""
    later = np.arange(3.0) if concat_dim == "member" else np.arange(3.0, 6.0)  # members: the same times
    parts = [_network(t).drop_vars("elevation") for t in (np.arange(3.0), later)]
    files = _write(tmp_path, {"a.nc": parts[0], "b.nc": parts[1].isel(station=slice(None, None, -1))})
    with pytest.raises(InputError, match=r"coordinate 'x' \(on station\) differs between .*a\.nc and .*b\.nc"):
        io.open_dataset(files, concat_dim=concat_dim)


def test_stations_in_the_same_order_are_joined(tmp_path):
    files = _write(tmp_path, {"a.nc": _network(np.arange(3.0)), "b.nc": _network(np.arange(3.0, 6.0))})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with io.open_dataset(files, concat_dim="time") as ds:
            xr.testing.assert_allclose(ds.load(), _network(np.arange(6.0)))


def test_a_static_variable_that_differs_is_refused(tmp_path):
    other = _network(np.arange(3.0, 6.0))
    other["elevation"] = other.elevation + 1.0
    files = _write(tmp_path, {"a.nc": _network(np.arange(3.0)), "b.nc": other})
    with pytest.raises(InputError, match=r"variable 'elevation' \(on station\) differs"):
        io.open_dataset(files, concat_dim="time")


def test_a_variable_missing_from_a_file_is_warned_about(tmp_path):
    files = _write(tmp_path, {"a.nc": _network(np.arange(3.0)),
                              "b.nc": _network(np.arange(3.0, 6.0)).drop_vars("temperature")})
    with pytest.warns(UserWarning, match=r"'temperature' is not in .*b\.nc: its values there are missing"):
        ds = io.open_dataset(files, concat_dim="time")
    assert ds.temperature.isel(time=slice(3, None)).isnull().all()
    ds.close()


def _tiles(tmp_path, order: list[int]) -> list[str]:
    x, y = np.arange(8.0), np.arange(5.0)
    whole = xr.Dataset({"v": (("y", "x"), np.add.outer(y, x))}, coords={"y": y, "x": x})
    parts = {f"tile_{k}.nc": whole.isel(x=slice(4 * k, 4 * k + 4)) for k in order}
    return _write(tmp_path, parts)


def test_tiles_given_out_of_order_are_warned_about_or_sorted(tmp_path):
    files = _tiles(tmp_path, [1, 0])
    with pytest.warns(UserWarning, match=r"joined along 'x' give a x that is not in order"):
        io.open_dataset(files, concat_dim="x").close()
    with warnings.catch_warnings():  # joined by their coordinates, they are put in order
        warnings.simplefilter("error")
        with io.open_dataset(files) as ds:
            assert ds.x.values.tolist() == list(range(8))


def test_files_holding_other_variables_are_merged_without_warnings(tmp_path):
    ds = _network(np.arange(3.0))
    files = _write(tmp_path, {"t.nc": ds[["temperature"]], "e.nc": ds[["elevation"]]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with io.open_dataset(files) as both:
            assert set(both.data_vars) == {"temperature", "elevation"}


def test_tiles_that_do_not_line_up_name_the_problem(tmp_path):
    a, b = _tiles(tmp_path, [0, 1])
    shifted = xr.open_dataset(b).load()
    shifted = shifted.assign_coords(y=shifted.y + 0.5)
    shifted.to_netcdf(tmp_path / "shifted.nc")
    with pytest.raises(InputError, match=r"cannot join .*tile_0\.nc and the 1 other file\(s\)"):
        io.open_dataset([a, str(tmp_path / "shifted.nc")])


def test_snapshots_with_a_scalar_time_are_joined_along_it(tmp_path):
    """One file per time, each with a scalar time coordinate: the common layout of model output."""
    x = np.arange(4.0)
    parts = {f"snap_{k}.nc": xr.Dataset({"v": ("x", x + k), "run_label": ((), f"run {k}")},
                                        coords={"x": x, "time": np.float64(k)}) for k in range(3)}
    files = _write(tmp_path, parts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with io.open_dataset(files, concat_dim="time") as ds:
            assert ds.v.dims == ("time", "x") and ds.time.values.tolist() == [0.0, 1.0, 2.0]


def test_what_places_no_value_may_differ_with_a_warning(tmp_path):
    ds = _network(np.arange(3.0))
    a, b = ds.assign(note=((), 1.0)), _network(np.arange(3.0, 6.0)).assign(note=((), 2.0))
    files = _write(tmp_path, {"a.nc": a, "b.nc": b})
    with pytest.warns(UserWarning, match=r"variable 'note' differs between .*it does not place the imputed values"):
        io.open_dataset(files, concat_dim="time").close()


def test_round_off_and_dropped_variables_are_no_disagreement(tmp_path):
    later = _network(np.arange(3.0, 6.0))
    later = later.assign_coords(x=later.x.astype(np.float32))  # the same sites, written in float32
    later["elevation"] = later.elevation + 1.0
    files = _write(tmp_path, {"a.nc": _network(np.arange(3.0)).assign_coords(x=lambda d: d.x * (1 + 1e-12)),
                              "b.nc": later})
    with pytest.raises(InputError, match="elevation"):
        io.open_dataset(files, concat_dim="time")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with io.open_dataset(files, concat_dim="time", drop_variables=["elevation"]) as ds:
            assert ds.sizes["time"] == 6 and "elevation" not in ds
