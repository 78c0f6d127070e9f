"""``geogpvae predict``: a saved model predicts at new locations (geogpvae/cli/predict.py)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from cli_helpers import _error_line, _write

from geogpvae.cli import main


def test_predict_at_new_locations(data, tmp_path, capsys):
    coords = _write(
        xr.Dataset(coords={"y": np.linspace(0, 1, 5), "x": np.linspace(0, 1, 7)}),
        tmp_path / "grid.nc",
    )
    out = tmp_path / "pred.nc"
    assert main(["predict", str(data["model"]), str(coords), str(out), "-q"]) == 0
    with xr.open_dataset(out) as ds:
        assert {"v0", "v0_std", "v2", "v2_std"} <= set(ds.data_vars)
        assert ds.v0.dims == ("y", "x") and ds.v0.shape == (5, 7)
        assert np.isfinite(ds.v0.values).all() and (ds.v0_std.values > 0).all()
    assert main(["predict", str(data["grid"]), str(coords), str(tmp_path / "p2.nc")]) == 2
    assert "is not a readable geogpvae model file" in _error_line(capsys)
    assert main(["predict", str(data["model"]), str(coords), str(coords), "--overwrite"]) == 2


def _grid(tmp_path, ny=10, nx=4):
    return _write(xr.Dataset(coords={"y": np.linspace(0, 1, ny), "x": np.linspace(0, 1, nx)}),
                  tmp_path / "grid.nc")


def test_jobs_fill_parts_of_one_store_as_one_prediction_does(data, tmp_path):
    coords, store = _grid(tmp_path), tmp_path / "pred.zarr"
    model = str(data["model"])
    assert main(["predict", model, str(coords), str(store), "--template", "--chunks", "y=4", "-q"]) == 0
    with xr.open_zarr(store) as empty:
        assert empty.v0.encoding["chunks"] == (4, 4) and np.isnan(empty.v0.values).all()
    for part in ("y=4:8", "y=8:10", "y=0:4"):  # in any order, each job its own region
        assert main(["predict", model, str(coords), str(store), "--region", part, "-q"]) == 0
    whole = tmp_path / "whole.nc"
    assert main(["predict", model, str(coords), str(whole), "-q"]) == 0
    with xr.open_zarr(store) as filled, xr.open_dataset(whole) as ref:
        for v in ("v0", "v0_std", "v2", "v2_std"):  # equal to float32 rounding, as lazy predictions are
            np.testing.assert_allclose(filled[v].values, ref[v].values, rtol=1e-6)
    blocks = tmp_path / "blocks.nc"  # --chunks alone: block by block, the same numbers
    assert main(["predict", model, str(coords), str(blocks), "--chunks", "y=3,x=2", "-q"]) == 0
    with xr.open_dataset(blocks) as got, xr.open_dataset(whole) as ref:
        np.testing.assert_allclose(got.v0.values, ref.v0.values, rtol=1e-6)


def test_region_and_template_mistakes_are_refused_before_any_work(data, tmp_path, capsys):
    coords, store = _grid(tmp_path), tmp_path / "pred.zarr"
    model = str(data["model"])

    def refused(*extra):
        assert main(["predict", model, str(coords), *extra]) == 2
        return _error_line(capsys)

    assert "does not exist" in refused(str(store), "--region", "y=0:4")
    assert "--template needs --chunks" in refused(str(store), "--template")
    assert "name OUT *.zarr" in refused(str(tmp_path / "p.nc"), "--template", "--chunks", "y=4")
    assert "DIM=START:STOP" in refused(str(store), "--region", "y=4:2")
    assert "DIM=SIZE" in refused(str(store), "--template", "--chunks", "y=0")
    assert "not dims of the locations" in refused(str(store), "--template", "--chunks", "z=4")
    assert not store.exists()
    assert main(["predict", model, str(coords), str(store), "--template", "--chunks", "y=4", "-q"]) == 0
    before = xr.open_zarr(store).load()
    assert "cuts through chunks" in refused(str(store), "--region", "y=2:6")
    assert "outside the store" in refused(str(store), "--region", "y=8:12")
    assert "leave out --chunks" in refused(str(store), "--region", "y=0:4", "--chunks", "y=4")
    assert "give one of them" in refused(str(store), "--region", "y=0:4", "--template", "--chunks", "y=4")
    other = _write(xr.Dataset(coords={"y": np.linspace(0, 2, 10), "x": np.linspace(0, 1, 4)}),
                   tmp_path / "other.nc")
    assert main(["predict", model, str(other), str(store), "--region", "y=0:4"]) == 2
    assert "give the grid the store was made from" in _error_line(capsys)
    xr.testing.assert_identical(xr.open_zarr(store).load(), before)  # nothing was written
