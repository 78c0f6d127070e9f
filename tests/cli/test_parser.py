"""The ``geogpvae`` parser: the version through ``python -m geogpvae`` and the help of each command."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_helpers import _env

import geogpvae
from geogpvae.cli import main


def test_version_through_python_m():
    res = subprocess.run(
        [sys.executable, "-m", "geogpvae", "--version"],
        check=False,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,  # a hang guard, not a speed limit
    )
    assert res.returncode == 0
    assert res.stdout.strip().startswith(f"geogpvae {geogpvae.__version__}")


@pytest.mark.parametrize("command", ["impute", "info", "validate", "predict", "plot", "demo"])
def test_help_has_examples(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"geogpvae {command}" in out
