"""The ``geogpvae`` command-line tool: impute NetCDF files, inspect them, validate, predict, plot, run a demo.

One module per command (``geogpvae COMMAND --help`` describes each); :mod:`~geogpvae.cli.dispatch`
runs them and maps errors to exit codes (docs/conventions.md): 0 success, 1 failure during the run,
2 bad usage or input, 128 + N stopped by signal N (continue with ``--resume``).
"""

from __future__ import annotations

from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from .dispatch import main
from .info import estimate_memory
from .parser import build_parser

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "build_parser", "estimate_memory", "main"]
