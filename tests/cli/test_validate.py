"""``geogpvae validate``: scores of held-out values, as text or JSON; nothing written; clear errors."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import geogpvae.validation
from geogpvae.cli import main
from geogpvae.datasets import make_gaussian_field


@pytest.fixture()
def field(tmp_path):
    path = tmp_path / "field.nc"
    ds = make_gaussian_field((18, 18), n_vars=2, seed=3)
    ds["v1"] = np.exp(ds.v1)  # positive, so that it can be log-modelled
    ds["v1"].attrs["units"] = "mg/kg"
    ds.to_netcdf(path)
    return path


def test_json_has_a_row_per_variable_and_nothing_is_written(field, tmp_path, capsys):
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["validate", str(field), "--epochs", "3", "--neighbours", "8", "--share", "0.2", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["share"] == 0.2 and report["gaps"] == "random"
    assert list(report["variables"]) == ["v0", "v1"]
    row = report["variables"]["v1"]
    assert row["units"] == "mg/kg" and row["space"] == "linear" and row["n"] > 0 and 0 <= row["cov95"] <= 1 and np.isfinite(row["rmse"])
    assert row["cov95_low"] <= row["cov95"] <= row["cov95_high"] and row["cov95_high"] - row["cov95_low"] > 0.05
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_spatial_block_folds_from_the_command_line(field, capsys):
    code = main(["validate", str(field), "--vars", "v1", "--gaps", "blocks", "--folds", "2", "--block-size", "6",
                 "--epochs", "2", "--neighbours", "6", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["folds"] == 2 and report["gaps"] == "blocks" and report["block_size"] == 6
    row = report["variables"]["v1"]
    assert row["n"] > 0 and np.isfinite(row["crps"])
    assert main(["validate", str(field), "--vars", "v1", "--gaps", "blocks", "--folds", "2", "--epochs", "2",
                 "--neighbours", "6"]) == 0
    assert "each observed value once, in 2 folds (blocks of side" in capsys.readouterr().out


def test_the_flags_reach_validate(field, capsys, monkeypatch):
    seen = {}
    real = geogpvae.validation.validate

    def spy(ds, vars, **kwargs):
        seen.update(vars=vars, **kwargs)
        return real(ds, vars, **kwargs)

    monkeypatch.setattr(geogpvae.validation, "validate", spy)
    code = main(["validate", str(field), "--vars", "v1", "--gaps", "shaped", "--share", "0.3", "--seed", "4",
                 "--epochs", "2", "--neighbours", "6", "--engine", "hpa", "--log-vars", "v1", "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert seen["vars"] == ["v1"] and seen["gaps"] == "shaped" and seen["share"] == 0.3 and seen["seed"] == 4
    assert seen["epochs"] == 2 and seen["neighbours"] == 6 and seen["engine"] == "hpa"
    assert seen["transforms"] == {"v1": "log"}
    assert "v1" in out and "cov95" in out and "v0 " not in out
    assert "mg/kg; log" in out  # NLL, cov95 and z2 of a log-modelled variable are of its log
    # 18 x 18 cells, 30 % of v1 held out: about 100 values, enough; a smaller share says how rough it is
    assert "few held-out values" not in out
    assert main(["validate", str(field), "--vars", "v1", "--share", "0.05", "--epochs", "2", "--neighbours", "6"]) == 0
    out, err = capsys.readouterr()
    assert re.search(r"\n\S+ +\d+ .* \d\.\d\d-\d\.\d\d +\d", out)  # the range in the row
    assert re.search(r"note: few held-out values scored: v1 on \d+ \(cov95 \d\.\d\d-\d\.\d\d\)", out)
    assert "few held-out values" not in err  # said once, in the table


@pytest.mark.parametrize("args, words", [
    (["--share", "0"], "strictly between 0 and 1"),
    (["--share", "half"], "give a share"),
    (["--gaps", "bogus"], "invalid choice"),
    (["--folds", "1"], "folds must be a whole number >= 2"),
    (["--vars", "nope"], "not a data variable"),
])
def test_bad_requests_exit_2(field, args, words, capsys):
    assert main(["validate", str(field), *args]) == 2
    assert words in capsys.readouterr().err


def test_library_words_become_flags(tmp_path, capsys):
    ds = make_gaussian_field((8, 8), n_vars=2, seed=3)
    one = np.full(ds.v1.shape, np.nan)
    one[0, 0] = 1.0  # one observed value
    ds["v1"] = (ds.v1.dims, one)
    ds.to_netcdf(tmp_path / "one.nc")
    assert main(["validate", str(tmp_path / "one.nc"), "--epochs", "2"]) == 2
    assert "leave v1 out of --vars" in capsys.readouterr().err


def test_a_score_that_is_not_a_number_is_json_null():
    # JSON has no NaN: a variable with nothing scored reads null, so strict parsers accept it
    from geogpvae.cli.validate import _json_value

    assert json.dumps([_json_value(float("nan")), _json_value(0.5), _json_value(3), _json_value("mg/kg")],
                      allow_nan=False) == '[null, 0.5, 3, "mg/kg"]'
