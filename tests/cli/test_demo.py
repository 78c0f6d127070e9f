"""``geogpvae demo``: impute a synthetic field, score it and write it."""

from __future__ import annotations

import xarray as xr
from cli_helpers import SMALL

from geogpvae.cli import main


def test_demo_scores_and_writes(tmp_path, capsys):
    out = tmp_path / "demo.nc"
    args = ["demo", str(out), "--shape", "12,12", "--epochs", "3", *SMALL, "--progress", "none"]
    assert main(args) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "mean-fill RMSE" in text and "coverage" in text and "RMSE" in text.splitlines()[-1]
    # the demo's quick budget is said in its first line, not warned about
    assert "3 epochs, a quick run (geogpvae impute would train 1000 on a field this size)" in captured.err and "warning" not in captured.err
    with xr.open_dataset(out) as ds:
        assert {"v0", "v0_std", "v0_imputed"} <= set(ds.data_vars)
    assert main(args) == 2  # exists
