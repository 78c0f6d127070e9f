"""``geogpvae plot`` (geogpvae/cli/plot.py): the figure written, the layers, map or profile chosen,
``--isel``, ``--layer`` and ``--axis``, refused requests and the warnings it shows."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from cli_helpers import _error_line
from figure_helpers import make_global

from geogpvae.cli import main


@pytest.mark.parametrize(
    "extra, name",
    [([], "map.png"), (["--layer", "1"], "layers.pdf"), (["--uncertainty"], "std.png")],
)
def test_plot_writes_a_figure(extra, name, data, tmp_path):
    fig = tmp_path / name
    assert main(["plot", str(data["out"]), "--var", "v1", *extra, "-o", str(fig), "-q"]) == 0
    magic = b"\x89PNG" if name.endswith(".png") else b"%PDF"
    assert fig.read_bytes()[:4] == magic
    assert list(tmp_path.glob(".*.tmp")) == []


def test_plot_of_a_one_dimensional_file_is_a_profile(tmp_path):
    import pandas as pd

    days = pd.date_range("2024-01-01", periods=40)
    level = np.sin(np.arange(40) / 5.0)
    level[12:18] = np.nan
    src = tmp_path / "series.nc"
    xr.Dataset({"level": ("time", level, {"units": "m"})}, coords={"time": days}).to_netcdf(src)
    out, fig = tmp_path / "filled.nc", tmp_path / "level.png"
    assert main(["impute", str(src), str(out), "--epochs", "3", "--neighbours", "4", "-q"]) == 0
    assert main(["plot", str(out), "-o", str(fig), "-q"]) == 0
    assert fig.read_bytes()[:4] == b"\x89PNG"


def test_plot_isel_of_one_station_draws_its_series(tmp_path, capsys):
    # a (time, station) network: --isel station=N is that station's series, said as a profile
    rng = np.random.default_rng(0)
    level = np.sin(np.arange(30)[:, None] / 4.0 + np.arange(5)) + 0.1 * rng.normal(size=(30, 5))
    level[10:15, 2] = np.nan
    src = tmp_path / "net.nc"
    xr.Dataset({"level": (("time", "station"), level, {"units": "m"})},
               coords={"time": np.arange(30.0), "x": ("station", np.arange(5.0)),
                       "y": ("station", np.arange(5.0) ** 2)}).to_netcdf(src)
    out, fig = tmp_path / "filled.nc", tmp_path / "s2.png"
    assert main(["impute", str(src), str(out), "--epochs", "3", "--neighbours", "4", "-q"]) == 0
    capsys.readouterr()
    assert main(["plot", str(out), "--isel", "station=2", "-o", str(fig)]) == 0
    assert fig.read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {fig} (profile of level)" in capsys.readouterr().err


def test_plot_of_a_time_series_of_maps_slices_along_time(tmp_path, capsys):
    """A (time, y, x) output has no z: the default layers run along its first non-horizontal dim."""
    rng = np.random.default_rng(0)
    value = rng.standard_normal((3, 5, 6))
    flag = (rng.random(value.shape) < 0.3).astype(np.int8)
    src = tmp_path / "series_filled.nc"
    xr.Dataset({"v": (("time", "y", "x"), value), "v_std": (("time", "y", "x"), 0.1 * flag),
                "v_imputed": (("time", "y", "x"), flag)},
               coords={"time": np.arange(3.0), "y": np.arange(5.0), "x": np.arange(6.0)}).to_netcdf(src)
    capsys.readouterr()
    assert main(["plot", str(src), "-o", str(tmp_path / "a.png")]) == 0
    assert "(layers of v along time)\n" in capsys.readouterr().err  # 1-D coordinates: no map hint
    assert main(["plot", str(src), "--layer", "2,3", "-o", str(tmp_path / "b.png")]) == 0
    assert "along time" in capsys.readouterr().err
    assert main(["plot", str(src), "--axis", "y", "-o", str(tmp_path / "c.png")]) == 0
    assert "(layers of v along y)" in capsys.readouterr().err


def test_layers_of_a_curvilinear_grid_say_how_to_draw_a_map(tmp_path, capsys):
    """(time, y, x) with 2-D lon/lat, as NEMO writes: the default layers are drawn in grid steps,
    and the message says that --map draws the map."""
    rng = np.random.default_rng(1)
    j, i = np.meshgrid(np.arange(5.0), np.arange(6.0), indexing="ij")
    value = rng.standard_normal((3, 5, 6))
    flag = (rng.random(value.shape) < 0.3).astype(np.int8)
    src = tmp_path / "nemo_filled.nc"
    xr.Dataset({"sst": (("time", "y", "x"), value), "sst_std": (("time", "y", "x"), 0.1 * flag),
                "sst_imputed": (("time", "y", "x"), flag)},
               coords={"time": np.arange(3.0),
                       "nav_lon": (("y", "x"), -30.0 + i + 0.1 * j, {"standard_name": "longitude"}),
                       "nav_lat": (("y", "x"), 40.0 + j - 0.1 * i, {"standard_name": "latitude"})}).to_netcdf(src)
    capsys.readouterr()
    assert main(["plot", str(src), "-o", str(tmp_path / "a.png")]) == 0
    err = capsys.readouterr().err
    assert "(layers of sst along time); drawn in grid steps: 'sst' has 2-D longitudes and latitudes " \
           "(nav_lon, nav_lat), and --map draws them on a map (--isel time=N picks the time)" in err
    assert main(["plot", str(src), "--map", "-o", str(tmp_path / "b.png")]) == 0
    assert "grid steps" not in capsys.readouterr().err
    # with coordinates of their own on y and x (a polar stereographic grid in metres), the layers
    # are drawn in those, not in grid steps
    with xr.open_dataset(src) as ds:
        projected = ds.assign_coords(y=("y", 25e3 * np.arange(5.0), {"units": "m"}),
                                     x=("x", 25e3 * np.arange(6.0), {"units": "m"})).load()
    projected.to_netcdf(tmp_path / "stereo.nc")
    assert main(["plot", str(tmp_path / "stereo.nc"), "-o", str(tmp_path / "c.png")]) == 0
    assert "(layers of sst along time); drawn in its y/x coordinates: 'sst' has 2-D" in capsys.readouterr().err


def test_plot_of_a_four_dimensional_file_draws_layers_along_its_vertical_axis(tmp_path, capsys):
    """(time, depth, y, x): layers along the depth (axis="Z"), at one time step: the first, or
    the one --isel names; --isel can fix only the dims a layer cannot show."""
    rng = np.random.default_rng(1)
    value = rng.standard_normal((2, 3, 5, 6))
    flag = (rng.random(value.shape) < 0.3).astype(np.int8)
    dims = ("time", "depth", "y", "x")
    src = tmp_path / "ocean_filled.nc"
    xr.Dataset({"v": (dims, value), "v_std": (dims, 0.1 * flag), "v_imputed": (dims, flag)},
               coords={"time": np.arange(2.0), "depth": ("depth", [5.0, 15.0, 30.0], {"axis": "Z", "units": "m"}),
                       "y": np.arange(5.0), "x": np.arange(6.0)}).to_netcdf(src)
    capsys.readouterr()
    assert main(["plot", str(src), "-o", str(tmp_path / "a.png")]) == 0
    assert "(layers of v along depth, time=0)" in capsys.readouterr().err
    assert main(["plot", str(src), "--layer", "2", "--isel", "time=1", "-o", str(tmp_path / "b.png")]) == 0
    assert "(layers of v along depth, time=1)" in capsys.readouterr().err
    assert main(["plot", str(src), "--layer", "1", "--isel", "time=2", "-o", str(tmp_path / "c.png")]) == 2
    assert "--isel time=2: time has 2 positions (0 to 1)" in _error_line(capsys)
    assert main(["plot", str(src), "--layer", "1", "--isel", "y=0", "-o", str(tmp_path / "d.png")]) == 2
    assert "--isel can fix only time" in _error_line(capsys)
    assert main(["plot", str(src), "--axis", "dpeth", "-o", str(tmp_path / "e.png")]) == 2
    assert "--axis dpeth: not a dim of 'v' (dims time, depth, y, x)" in _error_line(capsys)
    with xr.open_dataset(src) as ds:  # a dim named depth, without attributes, is vertical too
        plain = ds.load().assign_coords(depth=("depth", [5.0, 15.0, 30.0]))
    plain.to_netcdf(tmp_path / "plain.nc")
    assert main(["plot", str(tmp_path / "plain.nc"), "-o", str(tmp_path / "f.png")]) == 0
    assert "(layers of v along depth, time=0)" in capsys.readouterr().err


def test_plot_isel_picks_the_slice_of_a_map(tmp_path, capsys, monkeypatch):
    from geogpvae import plot

    value = np.arange(60.0).reshape(3, 4, 5)
    value[0] = np.nan
    src = tmp_path / "series_filled.nc"
    xr.Dataset({"v": (("time", "y", "x"), value), "v_std": (("time", "y", "x"), np.zeros_like(value))},
               coords={"time": np.arange(3.0), "y": np.arange(4.0), "x": np.arange(5.0)}).to_netcdf(src)
    seen = []
    real = plot.field_map
    monkeypatch.setattr(plot, "field_map", lambda *a, **k: seen.append((k.get("isel"), k.get("outline_holes")))
                        or real(*a, **k))
    assert main(["plot", str(src), "--isel", "time=2", "-o", str(tmp_path / "a.png"), "-q"]) == 0
    assert main(["plot", str(src), "--isel", "time=2", "--no-outlines", "-o", str(tmp_path / "c.png"), "-q"]) == 0
    assert seen == [({"time": 2}, None), ({"time": 2}, False)]  # by cell size by default; they can go
    assert main(["plot", str(src), "--uncertainty", "--no-outlines", "-o", str(tmp_path / "d.png")]) == 2
    assert "--no-outlines is an option of maps" in _error_line(capsys)
    # the library's advice comes back in the command's words
    assert main(["plot", str(src), "--map", "-o", str(tmp_path / "b.png")]) == 2
    assert "the first slice with values is --isel time=1" in _error_line(capsys)
    assert main(["plot", str(src), "--isel", "tmie=2", "-o", str(tmp_path / "b.png")]) == 2
    assert "--isel: 'tmie' is not a dim of 'v' to slice" in _error_line(capsys)
    assert main(["plot", str(src), "--isel", "time=1", "--uncertainty", "-o", str(tmp_path / "b.png")]) == 2
    assert main(["plot", str(src), "--isel", "time", "-o", str(tmp_path / "b.png")]) == 2
    assert "DIM=INDEX" in _error_line(capsys)
    assert not (tmp_path / "b.png").exists()


def test_plot_refuses_bad_requests(data, tmp_path, capsys):
    fig = tmp_path / "f.png"
    assert main(["plot", str(data["out"]), "--var", "zz", "-o", str(fig)]) == 2
    assert "'zz'" in _error_line(capsys)
    assert main(["plot", str(data["out"]), "-o", str(tmp_path / "f.xyz")]) == 2
    assert "format" in _error_line(capsys)
    assert main(["plot", str(data["out"]), "--map", "--layer", "1", "-o", str(fig)]) == 2
    assert not fig.exists()


def test_plot_command_quiet_drops_the_missing_outlines_warning(no_map_data, _no_network_and_fresh_warnings,
                                                                 tmp_path, capsys):
    """``geogpvae plot -q`` says nothing about absent coastlines; without -q one line says so."""
    from geogpvae.cli import main

    ds, _ = make_global()
    path = tmp_path / "sst.nc"
    ds.isel(time=0, drop=True).to_netcdf(path)
    assert main(["plot", "-q", str(path), "-o", str(tmp_path / "quiet.png")]) == 0
    assert capsys.readouterr().err == ""
    # the same process again without -q: the warning dropped above did not count as shown
    assert main(["plot", str(path), "-o", str(tmp_path / "said.png")]) == 0
    err = capsys.readouterr().err
    assert "warning: no coastlines" in err and "Natural Earth" in err


def test_residual_variogram_needs_the_truth_and_draws_it(data, tmp_path, capsys):
    from cli_helpers import _write

    from geogpvae.datasets import make_gaussian_field

    _, truth = make_gaussian_field((16, 16), seed=0, return_truth=True)  # the field behind grid.nc
    truth_file = _write(truth, tmp_path / "truth.nc")
    fig = tmp_path / "residuals.png"
    args = ["plot", str(data["out"]), "--var", "v1", "--residual-variogram", "-o", str(fig)]
    assert main(args) == 2
    assert "needs --truth" in _error_line(capsys) and not fig.exists()
    assert main([*args, "--truth", str(truth_file)]) == 0
    assert fig.read_bytes()[:4] == b"\x89PNG"
    assert "residual variogram of v1" in capsys.readouterr().err
