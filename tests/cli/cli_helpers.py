"""Shared by the tests of the ``geogpvae`` command in this folder: small training settings, the
environment of a ``python -m geogpvae`` child, writing a file and the last line on stderr.

Training is kept tiny: a few epochs on 16 x 16 grids with small networks.
"""

from __future__ import annotations

import os
from pathlib import Path

import xarray as xr

import geogpvae

REPO = Path(__file__).resolve().parents[2]
SMALL = [
    "--option",
    "encoder_hidden=[16,16]",
    "--option",
    "decoder_hidden=[16,16]",
    "--option",
    "samples=8",
    "--option",
    "calibrate=false",
]
TINY = ["--neighbours", "4", "--epochs", "3", *SMALL, "-q"]


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    # the short training budgets of these tests are on purpose: their TrainingWarning is
    # ignored, as pyproject.toml's filter does in this process
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore:epochs="}


def _write(ds: xr.Dataset, path: Path) -> Path:
    geogpvae.to_netcdf(ds, path)
    return path


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "no message on stderr"
    return err[-1]


def _no_training(*args, **kwargs):
    raise AssertionError("bad input must be refused before training")
