"""What ``geogpvae impute`` says while it works: epochs, calibration rounds, prediction."""

from __future__ import annotations

import pytest

import geogpvae
from geogpvae.cli import main
from geogpvae.datasets import make_gaussian_field

JOB = ["--neighbours", "4", "--epochs", "2", "--option", "encoder_hidden=[8]",
       "--option", "decoder_hidden=[8]", "--option", "samples=4"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    path = tmp_path_factory.mktemp("progress") / "grid.nc"
    geogpvae.to_netcdf(make_gaussian_field((10, 10), seed=0), path)
    return path


def test_impute_reports_every_stage_up_to_the_output(grid, tmp_path, capsys):
    out = tmp_path / "out.nc"
    assert main(["impute", str(grid), str(out), *JOB, "--progress", "log"]) == 0
    err = capsys.readouterr().err.splitlines()
    starts = [" ".join(line.split()[:2]) for line in err]
    # in this order: training, calibration, prediction, then the output is written
    order = [starts.index("epoch 2/2"), starts.index("calibration 0/5"),
             starts.index("calibration 5/5"), starts.index("prediction 0/100"),
             starts.index("prediction 100/100"), starts.index("geogpvae: wrote")]
    assert order == sorted(order)
    assert err[starts.index("prediction 100/100")].split()[2] == "locations"


def test_quiet_impute_says_nothing(grid, tmp_path, capsys):
    assert main(["impute", str(grid), str(tmp_path / "out.nc"), *JOB, "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_progress_none_keeps_the_messages_but_not_the_stages(grid, tmp_path, capsys):
    assert main(["impute", str(grid), str(tmp_path / "out.nc"), *JOB, "--progress", "none"]) == 0
    err = capsys.readouterr().err
    assert "geogpvae: wrote" in err
    assert not any(w in err for w in ("epoch ", "calibration ", "prediction "))


def test_predict_reports_its_chunks_unless_quiet(grid, tmp_path, capsys):
    model, coords = tmp_path / "m.pt", tmp_path / "coords.nc"
    assert main(["impute", str(grid), str(tmp_path / "o.nc"), *JOB, "-q",
                 "--save-model", str(model)]) == 0
    geogpvae.to_netcdf(make_gaussian_field((6, 5), seed=3)[["x", "y"]], coords)
    assert main(["predict", str(model), str(coords), str(tmp_path / "p.nc"),
                 "--progress", "log"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [" ".join(line.split()[:3]) for line in err[:2]] == [
        "prediction 0/30 locations", "prediction 30/30 locations"]
    assert main(["predict", str(model), str(coords), str(tmp_path / "q.nc"), "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_the_announced_epochs_are_the_epochs_run(grid, tmp_path, capsys, monkeypatch):
    """epochs=None: the number impute announces is the one training runs (one resolution)."""
    from geogpvae.engine import config

    monkeypatch.setattr(config, "STEP_BUDGET", 3)  # 3 full-batch steps: 3 epochs of 1 step
    monkeypatch.setattr(config, "MIN_EPOCHS", 3)  # (and no more for the mini-batch floor)
    out = tmp_path / "out.nc"
    job = [a for a in JOB if a not in ("--epochs", "2")]
    assert main(["impute", str(grid), str(out), *job, "--progress", "none"]) == 0
    announced = [line for line in capsys.readouterr().err.splitlines() if "neighbours," in line]
    assert announced and announced[0].endswith(", 3 epochs")
    with geogpvae.open_dataset(out) as ds:
        assert int(ds.attrs["geogpvae_epochs"]) == 3
