"""Settings of a command: a TOML job file, ``--option`` literals and the flags that override them
(geogpvae/cli/settings.py)."""

from __future__ import annotations

import json
import textwrap

import xarray as xr

from geogpvae.cli import main
from geogpvae.cli import settings as cli_settings


def test_config_file_with_flags_overriding_it(data, tmp_path):
    sub = tmp_path / "job"
    sub.mkdir()
    config = sub / "job.toml"
    config.write_text(
        textwrap.dedent(f"""
        input = "{data["grid"]}"
        output = "from_config.nc"      # relative to the config file's folder
        vars = ["v0", "v1"]
        neighbours = 6
        epochs = 2
        [options]
        samples = 8
        calibrate = false
        encoder_hidden = [16, 16]
        decoder_hidden = [16, 16]
        coord_scale = {{ x = 2.0 }}
        batch_size = 128
    """)
    )
    argv = [
        "impute",
        "--config",
        str(config),
        "--neighbours",
        "5",
        "--option",
        "batch_size=64",
        "-q",
    ]
    assert main(argv) == 0
    with xr.open_dataset(sub / "from_config.nc") as ds:
        assert int(ds.attrs["geogpvae_neighbours"]) == 5  # the flag wins
        assert int(ds.attrs["geogpvae_epochs"]) == 2  # from the file
        config_used = json.loads(ds.attrs["geogpvae_config"])
        assert config_used["batch_size"] == 64 and config_used["samples"] == 8
        assert "x multiplied by 2" in ds.attrs["geogpvae_coordinates"]
        assert "v2_std" not in ds.data_vars


def test_option_values_are_toml_or_json_literals():
    assert cli_settings.parse_option("batch_size=512") == {"batch_size": 512}
    assert cli_settings.parse_option("encoder_hidden=[64, 64]") == {"encoder_hidden": [64, 64]}
    assert cli_settings.parse_option("coord_scale={z = 5}") == {"coord_scale": {"z": 5}}
    assert cli_settings.parse_option('coord_scale={"z": 5}') == {"coord_scale": {"z": 5}}
    assert cli_settings.parse_option("coord_scale.z=5.5") == {"coord_scale": {"z": 5.5}}
    assert cli_settings.parse_option("kernel=matern52") == {"kernel": "matern52"}
    assert cli_settings.parse_option("lengthscale=null") == {"lengthscale": None}
    assert cli_settings.parse_option("calibrate=false") == {"calibrate": False}
