"""``geogpvae info``: variables, coordinates, places never observed and the memory estimate."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from cli_helpers import _write

from geogpvae.cli import main


def _climate_file(path: Path) -> Path:
    rng = np.random.default_rng(0)
    t2m = rng.normal(280, 5, (3, 6, 8))
    t2m[rng.random(t2m.shape) < 0.25] = np.nan
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K"}),
            "land": (
                ("lat", "lon"),
                (rng.random((6, 8)) < 0.5).astype("int8"),
                {"flag_values": np.array([0, 1], "int8"), "flag_meanings": "sea land"},
            ),
        },
        coords={
            "time": np.array(["2020-01-01", "2020-01-02", "2020-01-04"], dtype="datetime64[ns]"),
            "lat": ("lat", np.linspace(40, 45, 6), {"units": "degrees_north"}),
            "lon": ("lon", np.linspace(5, 12, 8), {"units": "degrees_east"}),
        },
    )
    return _write(ds, path)


def test_info_describes_variables_coordinates_and_memory(tmp_path, capsys):
    path = _climate_file(tmp_path / "t2m.nc")
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["layout"] == "gridded" and info["locations"] == 3 * 6 * 8
    assert list(info["variables"]) == ["t2m"]
    with xr.open_dataset(path) as ds:
        expected = float(ds.t2m.isnull().mean())
    assert info["variables"]["t2m"]["missing"] == pytest.approx(expected)
    assert "flag" in info["other_variables"]["land"]
    roles = {c["name"]: c["role"] for c in info["coordinates"]}
    assert roles == {"time": "time", "lat": "lat", "lon": "lon"}
    assert info["x"]["columns"] == 4  # days + 3 sphere columns
    assert "days since" in info["x"]["description"] and "sphere" in info["x"]["description"]
    assert info["memory_bytes"]["total"] > 8 * 144 * 4
    assert info["engine"]["epochs"] == 1000 and info["engine"]["default_epochs"] is None

    assert main(["info", str(path), "--neighbours", "8", "--option", "epochs=400"]) == 0
    text = capsys.readouterr().out
    assert "400 epochs of batches of 144, float32 (under half of the default budget's 1000 epochs)" in text
    for word in (
        "gridded",
        "t2m [K]",
        "missing",
        "(not imputed) land",
        "8 neighbours",
        "memory estimate",
        "an estimate",
    ):
        assert word in text


def test_info_says_which_places_have_no_value_at_any_time(tmp_path, capsys):
    """As impute would warn: land places never observed, and the mask variable that leaves them out."""
    with xr.open_dataset(_climate_file(tmp_path / "t2m.nc")) as ds:
        ds = ds.load()
    land = ds.land.values.astype(bool)
    t2m = ds.t2m.values.copy()
    t2m[0][~land] = 280.0  # every sea place observed once
    t2m[:, land] = np.nan
    path = _write(ds.assign(t2m=(ds.t2m.dims, t2m, ds.t2m.attrs), sea=1 - ds.land), tmp_path / "sea.nc")
    assert main(["info", str(path), "--json"]) == 0
    never = json.loads(capsys.readouterr().out)["never_observed"]
    assert never["places"] == ["lat", "lon"] and never["of"] == 48 and never["count"] == land.sum()
    assert main(["info", str(path)]) == 0
    assert re.search(rf"note: {land.sum()} of the 48 \(lat, lon\) places \(\d+%\) have no value at any "
                     r"time: .*mask=ds\['land'\] == 0", capsys.readouterr().out)
    assert main(["info", str(path), "--mask-var", "sea", "--json"]) == 0  # the mask leaves them out
    assert json.loads(capsys.readouterr().out)["never_observed"] is None
    assert main(["info", str(path), "--mask-var", "land"]) == 0  # the wrong way round: all of them inside
    assert f"note: {land.sum()} of the {land.sum()} (lat, lon) places inside the mask (100%)" in capsys.readouterr().out


def test_info_on_an_imputed_file_says_impute_would_refuse_it(data, capsys):
    assert main(["info", str(data["out"]), "--json"]) == 0
    imputed = json.loads(capsys.readouterr().out)["already_imputed"]
    assert imputed and set(imputed) <= {"v0", "v1", "v2"}
    assert main(["info", str(data["out"])]) == 0
    assert "already went through impute" in capsys.readouterr().out
    assert main(["info", str(data["grid"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["already_imputed"] == []


def test_info_calls_a_series_a_grid_and_sites_scattered(tmp_path, capsys):
    level = np.sin(np.arange(20.0))
    level[3:6] = np.nan
    series = _write(xr.Dataset({"level": ("time", level)}, coords={"time": np.arange(20.0)}), tmp_path / "s.nc")
    sites = _write(xr.Dataset({"v": ("site", level)}, coords={"x": ("site", level * 0 + np.arange(20.0)),
                                                              "y": ("site", np.arange(20.0) ** 2)}), tmp_path / "p.nc")
    layouts = []
    for path in (series, sites):
        assert main(["info", str(path), "--json"]) == 0
        layouts.append(json.loads(capsys.readouterr().out)["layout"])
    assert layouts == ["gridded", "scattered"]
