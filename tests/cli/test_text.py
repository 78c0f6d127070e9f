"""The command line reads clearly and fails fast: help text, messages, bad command lines."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import geogpvae
from geogpvae.cli import build_parser, main
from geogpvae.datasets import make_gaussian_field

REPO = Path(__file__).resolve().parents[2]


def _subparsers():
    parser = build_parser()
    (action,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return action.choices


def _help(command: str) -> str:
    return _subparsers()[command].format_help()


def test_demo_help_has_a_plain_percent_sign():
    text = _help("demo")
    assert "95% interval" in text and "%%" not in text


@pytest.mark.parametrize("command", ["impute", "info", "predict", "plot", "demo"])
def test_quiet_mentions_progress_only_where_there_is_one(command):
    sub = _subparsers()[command]
    flags = {o for a in sub._actions for o in a.option_strings}
    quiet = next(a for a in sub._actions if "-q" in a.option_strings)
    assert ("--progress" in quiet.help) == ("--progress" in flags)


@pytest.mark.parametrize("command", ["impute", "info", "predict", "plot", "demo"])
def test_every_flag_has_help(command):
    sub = _subparsers()[command]
    bare = [a.option_strings or [a.dest] for a in sub._actions if not a.help]
    assert bare == []


def test_no_x_as_a_times_sign_next_to_an_axis_named_x(tmp_path, capsys):
    path = geogpvae.to_netcdf(make_gaussian_field((4, 5, 6), n_vars=2), tmp_path / "f.nc")
    assert main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "z 4 \u00d7 y 5 \u00d7 x 6" in text
    # neither "z 4 x y 5" nor "z x 0.41"
    assert not re.search(r"\d x [a-z]|\b[a-z] x \d", text), text


def test_bad_demo_shape_is_a_usage_error(capsys):
    assert main(["demo", "--shape", "a,b"]) == 2
    err = capsys.readouterr().err
    assert "--shape takes 1 to 4 positive integers" in err and "int()" not in err


@pytest.mark.parametrize("argv", [
    ["impute", "--bogus"],
    ["impute", "only_one.nc"],
    ["plot", "x.nc"],
    ["info", "--neighbours", "x", "a.nc"],
    ["demo", "--shape", "0"],
    ["frobnicate"],
])
def test_bad_command_lines_fail_before_torch_is_imported(argv):
    code = ("import sys\nfrom geogpvae.cli import main\nrc = main(sys.argv[1:])\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\nsys.exit(rc)\n")
    res = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         cwd=REPO, timeout=600, check=False)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("geogpvae: error: ") and len(res.stderr.splitlines()) == 1


@pytest.mark.parametrize("flags, rc", [([], 0), (["--option", "kernel=matern99"], 2),
                                        (["--option", "neighbour_backend=ann"], 2)])
def test_info_and_refused_options_need_no_torch(volume_file, flags, rc):
    """Describing a file, or refusing a bad option value, is quick: torch is not imported."""
    code = ("import sys\nfrom geogpvae.cli import main\nrc = main(sys.argv[1:])\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\nsys.exit(rc)\n")
    res = subprocess.run([sys.executable, "-c", code, "info", *flags, str(volume_file)], capture_output=True,
                         text=True, cwd=REPO, timeout=600, check=False)
    assert res.returncode == rc, res.stderr
    if rc:
        assert "choose one of" in res.stderr, res.stderr


def test_plain_import_does_not_load_torch():
    code = ("import sys, geogpvae\nassert 'torch' not in sys.modules\n"
            "from geogpvae import impute, GPVAEImputer, InputError\nassert 'torch' in sys.modules\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         timeout=600, check=False)
    assert res.returncode == 0, res.stderr


@pytest.fixture
def volume_file(tmp_path):
    ds = make_gaussian_field((5, 6, 4), n_vars=1, extent=(4.0, 5.0, 3.0), seed=3)
    ds = ds.assign(v0_std=ds.v0 * 0 + 0.1)  # looks imputed enough for the plot command
    return geogpvae.to_netcdf(ds, tmp_path / "vol.nc")


def test_layer_flag_takes_numbers_and_coordinate_values(volume_file, tmp_path, monkeypatch):
    from geogpvae import plot

    seen = []
    real = plot.layers

    def spy(ds, var, layer=None, **kw):
        seen.append(layer)
        return real(ds, var, layer=layer, **kw)

    monkeypatch.setattr(plot, "layers", spy)
    assert main(["plot", str(volume_file), "--var", "v0", "--layer", "2,5", "-o",
                 str(tmp_path / "a.png"), "-q"]) == 0
    assert main(["plot", str(volume_file), "--var", "v0", "--layer", "1.0", "-o",
                 str(tmp_path / "b.png"), "-q"]) == 0  # z = 1.0 is the second layer
    assert seen == [[2, 5], [2]]


@pytest.mark.parametrize("layer, words", [
    ("6", "there is no layer 6: layers along 'z' are numbered 1 to 5"),
    ("0", "there is no layer 0"),
    ("-1", "there is no layer -1"),
    ("9.5", "z = 9.5 is not inside any layer"),
    ("two", "give layer numbers (counted from 1"),
])
def test_a_bad_layer_is_a_usage_error(volume_file, tmp_path, capsys, layer, words):
    fig = tmp_path / "f.png"
    assert main(["plot", str(volume_file), "--var", "v0", f"--layer={layer}", "-o", str(fig)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and "IndexError" not in err
    assert not fig.exists()


def test_a_layer_of_a_2d_field_is_a_usage_error(volume_file, tmp_path, capsys):
    flat = geogpvae.open_dataset(volume_file).isel(z=0, drop=True).load()
    path = geogpvae.to_netcdf(flat, tmp_path / "flat.nc")
    fig = tmp_path / "f.png"
    assert main(["plot", str(path), "--var", "v0", "--layer", "3", "-o", str(fig)]) == 2
    err = capsys.readouterr().err
    assert "'v0' is a 2-D field (dims y, x), one layer with no others along 'z'" in err
    assert "Traceback" not in err
    assert not fig.exists()
    assert main(["plot", str(path), "--var", "v0", "-o", str(fig), "-q"]) == 0  # the map


def test_coord_scale_option_merges_per_axis(tmp_path, capsys):
    ds = make_gaussian_field((4, 6, 5), n_vars=1, extent=(3.0, 50.0, 40.0), seed=4)
    path = geogpvae.to_netcdf(ds, tmp_path / "g.nc")
    assert main(["info", str(path), "--option", "coord_scale={z=5}"]) == 0
    text = capsys.readouterr().out
    line = next(v for v in text.splitlines() if v.startswith("model x"))
    # z as given; y and x still in cell steps (50/5 = 10 and 40/4 = 10 units per cell)
    assert "z multiplied by 5;" in line and "y multiplied by 0.1;" in line and "x multiplied by 0.1" in line, line


def test_output_that_is_a_link_or_pipe_is_refused_before_training(volume_file, tmp_path, capsys):
    real = tmp_path / "real.nc"
    real.write_bytes(b"old")
    (tmp_path / "link.nc").symlink_to(real)
    os.mkfifo(tmp_path / "pipe.nc")
    for name, words in (("link.nc", "it is a symbolic link"), ("pipe.nc", "it is not a regular file")):
        code = main(["impute", str(volume_file), str(tmp_path / name), "--overwrite", "--epochs", "1", "-q"])
        err = capsys.readouterr().err
        assert code == 2 and words in err and "Traceback" not in err, err
    assert (tmp_path / "link.nc").is_symlink() and real.read_bytes() == b"old"
    assert stat.S_ISFIFO((tmp_path / "pipe.nc").stat().st_mode)


def test_messages_name_the_commands_flags_not_the_librarys_arguments(tmp_path, capsys):
    import numpy as np
    import xarray as xr

    from geogpvae.cli.common import cli_words

    # scattered values without coordinates: the library says coords=[...], the command --coords
    path = tmp_path / "sites.nc"
    xr.Dataset({"v": ("site", np.r_[np.arange(9.0), np.nan])}).to_netcdf(path)
    assert main(["impute", str(path), str(tmp_path / "out.nc"), "--epochs", "1", "-q"]) == 2
    err = capsys.readouterr().err
    assert "--coords x,y" in err and "coords=[" not in err
    # a depth column as a data variable: the command says --coords, not ds.set_coords
    depth = xr.Dataset({"v": ("site", np.r_[np.arange(9.0), np.nan]), "depth": ("site", np.arange(10.0) % 3)},
                       coords={"x": ("site", np.arange(10.0)), "y": ("site", np.arange(10.0) % 4)})
    depth.to_netcdf(path)
    assert main(["impute", str(path), str(tmp_path / "out.nc"), "--epochs", "1", "--neighbours", "4", "--progress", "none"]) == 0
    err = capsys.readouterr().err
    assert "['depth'] are complete and named like coordinates" in err and "name them in --coords" in err
    assert "set_coords" not in err and "vars=" not in err
    assert cli_words("leave the cells out with a mask (mask=)") == "leave the cells out with a mask (--mask-var)"
    assert cli_words("pass vars=[...] to choose") == "pass --vars to choose"
    assert cli_words(
        "name them with coords=['lon', 'lat'] (or make them coordinates, ds.set_coords(['lon', 'lat']))"
    ) == "name them with --coords lon,lat"
    assert cli_words("name the coordinates with coords=['lon', 'lat', 'depth_cm'] (in their own units") == (
        "name the coordinates with --coords lon,lat,depth_cm (in their own units")
    assert cli_words("if the values lie at them, make them coordinates, ds.set_coords(['depth']); name the "
                     "variables with vars=[...] to silence this") == (
        "if the values lie at them, name them in --coords with the other coordinates; name the variables with "
        "--vars to silence this")
    # sample numbers made coordinates are left unused: no --coords for them
    assert "--coords" not in cli_words("(name the variables with vars=[...] to impute them, or make them "
                                       "coordinates, ds.set_coords(['sample_id']))")
    assert cli_words("or model it in log space (transforms={'kz': 'log'})") == "or model it in log space (--log-vars kz)"
    assert cli_words("or say transforms={'kz': None} to keep") == "or say --option transform.kz=none to keep"
    code = ("if -999 marks a missing value, make it NaN, e.g. ds['v'] = ds['v'].where(ds['v'] != -999), or "
            "give the variable a _FillValue or missing_value attribute in its file")
    assert cli_words(code) == ("if -999 marks a missing value, give the variable a _FillValue or missing_value "
                               "attribute in the file (e.g. with ncatted)")
