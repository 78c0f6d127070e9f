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
