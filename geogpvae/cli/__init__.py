"""The ``geogpvae`` command-line tool: impute NetCDF files, inspect them, validate, predict, plot, run a demo.

Commands
--------
``geogpvae impute IN.nc OUT.nc --vars a,b``
    Fill the holes of variables of one file (or a glob / several files combined with
    ``--concat-dim``, or one file of a sorted list per SLURM array task) and write the
    result, with ``v_std`` and ``v_imputed`` for each variable, to ``OUT`` atomically.
``geogpvae info IN.nc``
    What the toolkit sees in a file: candidate variables, coordinates and how they become
    the model's x, missing fractions, layout, and an estimate of the memory a run needs.
``geogpvae validate IN.nc``
    Hold out a share of each variable's observed values, impute the rest and print how the
    held-out values are predicted (RMSE, NLL, 95 % coverage per variable); writes nothing.
``geogpvae predict MODEL.pt COORDS.nc OUT.nc``
    Predict at new locations with a model saved by ``impute --save-model``.
``geogpvae plot OUT.nc --var v -o fig.png``
    Layer slices, a map or uncertainty panels of an imputed file.
``geogpvae demo [OUT.nc]``
    The built-in default job: a synthetic field with holes, imputed and scored.

Options of ``impute`` may come from a TOML file (``--config job.toml``); flags on the
command line override it. Engine options go in its ``[options]`` table or in repeated
``--option key=value`` flags (values are TOML or JSON literals).

Exit codes
----------
0
    Success.
1
    Failure during the run (training diverged, out of memory, a write failed, ...).
2
    Bad usage or bad input: a one-line message names the problem; nothing is written.
128 + N
    Stopped by signal N (143 for SIGTERM, 130 for SIGINT, 138 for SIGUSR1): a first signal
    during training after finishing the current epoch and writing a checkpoint; a second
    one at once, with the temporary files of writes in progress removed. ``OUT`` is not
    written. Run the same command with ``--resume`` to continue. A first signal after
    training lets the job finish (exit 0).

Layout
------
:mod:`~geogpvae.cli.dispatch` (``main``: parse, run, exit codes), :mod:`~geogpvae.cli.parser`
(the argument parser), :mod:`~geogpvae.cli.settings` (TOML job files and flags),
:mod:`~geogpvae.cli.files` (inputs, outputs, SLURM array tasks), one module per command
(:mod:`~geogpvae.cli.impute`, :mod:`~geogpvae.cli.info`, :mod:`~geogpvae.cli.validate`,
:mod:`~geogpvae.cli.predict`,
:mod:`~geogpvae.cli.plot`, :mod:`~geogpvae.cli.demo`) and :mod:`~geogpvae.cli.jobs`
(checkpoints, signals, distributed launches).
"""

from __future__ import annotations

from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from .dispatch import main
from .info import estimate_memory
from .parser import build_parser

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "build_parser", "estimate_memory", "main"]
