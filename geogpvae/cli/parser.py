"""The ``geogpvae`` argument parser: one sub-parser per command, with its help text."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._version import __version__
from ..engine.config import ENGINES, GPVAEConfig
from .common import PROG, UsageError
from .demo import cmd_demo
from .impute import cmd_impute
from .info import cmd_info
from .plot import cmd_plot
from .predict import cmd_predict
from .simulate import cmd_simulate
from .validate import cmd_validate

__all__ = ["build_parser"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors become :class:`UsageError` (one line, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


_FORMATTER = argparse.RawDescriptionHelpFormatter

_IMPUTE_EPILOG = f"""\
examples:
  {PROG} impute soil.nc soil_filled.nc --vars Cd,Cu,Pb
  {PROG} impute spe10.nc spe10_filled.nc --vars porosity,kx --log-vars kx --engine hpa \\
      --neighbours 30 --option coord_scale.z=5 --option batch_size=1024
  {PROG} impute "era5/*.nc" t2m_filled.nc --concat-dim time --vars t2m
  {PROG} impute in.nc out.nc --config job.toml --epochs 500      # flags override job.toml
  {PROG} impute in.nc out.nc --checkpoint-dir ckpt --resume     # continue after SIGTERM
  {PROG} impute "tiles/*.nc" "filled/{{stem}}_filled.nc" --task-index 3   # one file per array task

job.toml:
  vars = ["Cd", "Cu"]
  engine = "spa"
  neighbours = 20
  checkpoint-dir = "ckpt"
  [options]
  batch_size = 512
  coord_scale = {{ z = 5 }}

exit codes: 0 done; 1 failed; 2 bad usage or input (nothing written);
  128+N stopped by signal N (143 SIGTERM), OUT not written: a first signal during
  training stops after the epoch and a checkpoint; a second one stops at once.
"""

_SIMULATE_EPILOG = f"""\
examples:
  {PROG} simulate spe10.nc spe10_draws.nc -n 20 --vars porosity,kx --log-vars kx
  {PROG} impute soil.nc soil_filled.nc --save-model soil.pt
  {PROG} simulate soil.nc soil_draws.nc -n 100 --model soil.pt              # no new training
  {PROG} simulate soil.nc soil_draws_2.nc -n 100 --first 100 --model soil.pt  # the next 100

Each realisation keeps the observed values bit for bit and fills every hole jointly with the
others; realisation I of a seed is the same whatever -n and --first, so an ensemble can be
drawn in parts. The output holds each variable on (realization, ...) and v_imputed.
Training takes every impute option (checkpoints, --resume, torchrun/srun launches).
exit codes: as impute.
"""

_INFO_EPILOG = f"""\
examples:
  {PROG} info soil.nc
  {PROG} info "era5/*.nc" --concat-dim time --vars t2m --neighbours 30
  {PROG} info spe10.nc --json
"""

_PREDICT_EPILOG = f"""\
examples:
  {PROG} impute soil.nc soil_filled.nc --save-model soil.pt
  {PROG} predict soil.pt grid.nc soil_on_grid.nc
  {PROG} predict soil.pt grid.nc cd.zarr --template --chunks y=1000   # once
  {PROG} predict soil.pt grid.nc cd.zarr --region y=2000:3000        # in each job
COORDS.nc needs the coordinates the model was trained on (a grid: 1-D coordinates on their
own dims; scattered points: coordinates along one dim); its data variables are ignored.
"""

_VALIDATE_EPILOG = f"""\
examples:
  {PROG} validate soil.nc --vars Cd,Ni,Zn
  {PROG} validate stations.nc --gaps shaped --share 0.05 --json
The model trains once, without the held-out values; nothing is written. The scores say how
the imputation and its intervals do on values the model never saw (see the user guide,
"Reading the uncertainty").
"""

_PLOT_EPILOG = f"""\
examples:
  {PROG} plot spe10_filled.nc --var kx --layer 22,26,41 -o kx_layers.png
  {PROG} plot soil_filled.nc --var Cd --map -o cd_map.pdf
  {PROG} plot demo.nc --var v0 --uncertainty -o v0_std.png
  {PROG} plot soil_filled.nc --var Cd --residual-variogram --truth soil_truth.nc -o cd_residuals.png
  {PROG} plot t2m_filled.nc --var t2m --isel time=3 -o t2m_day4.png
Without --layer/--map/--uncertainty/--isel: layers for 3-D variables (along z, else along a
vertical dim such as depth, else along the first dim that is not horizontal, such as time), a
map otherwise (a profile along the coordinate for a 1-D grid: a transect, a time series or a
well log). Layers of a 4-D variable are drawn at the first time step (or other extra dim);
--layer with --isel time=I picks another.
"""

_DEMO_EPILOG = f"""\
examples:
  {PROG} demo
  {PROG} demo demo.nc --shape 64,64 --epochs 100
  {PROG} plot demo.nc --var v0 -o demo_v0.png
"""


def _common(sub: argparse.ArgumentParser, progress: bool = False) -> None:
    sub.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=None,
        help="no messages except errors" + (" (and no progress unless --progress)" if progress else ""),
    )
    sub.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the traceback of an error",
    )


def _engine_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--vars",
        help="variables to impute together, comma separated "
        "(default: every numeric data variable on the shared dims)",
    )
    sub.add_argument(
        "--coords", help="coordinates forming the model's x, comma separated (default: detected)"
    )
    sub.add_argument(
        "--mask-var", help="boolean variable marking the domain (False: not modelled, left as is)"
    )
    sub.add_argument(
        "--engine",
        choices=list(ENGINES),
        help=f"GP prior approximation (default {GPVAEConfig.engine})",
    )
    sub.add_argument(
        "--neighbours",
        type=int,
        help=f"neighbours H per location (default {GPVAEConfig.neighbours})",
    )
    sub.add_argument("--concat-dim", help="combine several input files along this dim")
    _shared(sub, "--option")
    sub.add_argument(
        "--config",
        metavar="JOB.toml",
        help="read settings from a TOML file; command-line flags override it",
    )


#: options that several commands take, with their usual help; ``_shared`` adds them
_SHARED: dict[str, dict[str, Any]] = {
    "--device": {"help": "auto (default: CUDA when present, the CPU for fields of under 32,768 locations), cpu, cuda or cuda:N"},
    "--seed": {"type": int, "help": f"random seed (default {GPVAEConfig.seed})"},
    "--overwrite": {"action": "store_true", "help": "replace an existing OUT"},
    "--progress": {
        "choices": ["auto", "bar", "log", "none"],
        "help": "progress of training, calibration and prediction (auto: a bar on a terminal, "
        "a line every 10 s otherwise)",
    },
    "--option": {
        "action": "append",
        "metavar": "KEY=VALUE",
        "help": "any engine option, repeatable; VALUE is a TOML/JSON literal "
        "(batch_size=512, encoder_hidden=[64,64], coord_scale.z=5)",
    },
}


def _shared(sub: argparse.ArgumentParser, flag: str, **changes: Any) -> None:
    """Add the shared option ``flag``, with ``changes`` to its settings (help, default)."""
    sub.add_argument(flag, **{**_SHARED[flag], **changes})


#: the options of ``impute`` beyond the engine flags, in the order of its help
_IMPUTE_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--log-vars", {"help": "variables to model in log space, comma separated"}),
    ("--epochs", {"type": int, "help": "training epochs (default: a step budget, 1000 "
                  "full-batch steps on small fields)"}),
    ("--device", {}),
    ("--seed", {}),
    ("--checkpoint-dir", {"metavar": "DIR", "help": "save resumable checkpoints here"}),
    ("--checkpoint-every", {"type": int, "metavar": "N", "help": "checkpoint every N epochs "
                            "(default 10), and always on SIGTERM/SIGINT/SIGUSR1"}),
    ("--resume", {"action": "store_true", "default": None, "help": "continue from the "
                  "checkpoint in --checkpoint-dir (starts afresh if none)"}),
    ("--overwrite", {"default": None, "help": "replace an existing OUT, model file or "
                     "checkpoint (never the input)"}),
    ("--skip-existing", {"action": "store_true", "default": None, "help": "do nothing (exit 0) "
                         "when OUT is a finished output, e.g. in a rerun job array; another "
                         "file at OUT (empty, truncated, not from geogpvae) exits 2"}),
    ("--save-model", {"metavar": "M.pt", "help": "also save the trained model"}),
    ("--task-index", {"type": int, "metavar": "I", "help": "process only file I (0-based) of the "
                      "sorted input list (default: $SLURM_ARRAY_TASK_ID with several files)"}),
    ("--progress", {}),
    ("--distributed", {"choices": ["auto", "off"], "help": "auto (default): join a torchrun/srun "
                       "launch of several processes; off: run alone"}),
    ("--dist-timeout", {"type": float, "metavar": "S", "help": "longest wait of one process for "
                        "the others, seconds (default 3600)"}),
]


def _impute_options(p: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """Add the options of ``impute`` beyond the engine flags (those in ``only``, if given)."""
    for flag, settings in _IMPUTE_OPTIONS:
        if only is not None and flag not in only:
            continue
        if flag in _SHARED:
            _shared(p, flag, **settings)
        else:
            p.add_argument(flag, **settings)


def _impute_parser(subs: Any) -> None:
    p = subs.add_parser(
        "impute",
        help="fill the holes of a NetCDF file",
        epilog=_IMPUTE_EPILOG,
        formatter_class=_FORMATTER,
        usage=f"{PROG} impute [options] IN [IN ...] OUT",
        description="Fill the holes of variables in NetCDF file(s) and write the "
        "result (with v_std and v_imputed) to OUT, atomically.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="input file(s), Zarr store(s) or glob pattern(s), then the output file (may contain "
        "{stem}, {name}, {index})",
    )
    _engine_flags(p)
    _impute_options(p)
    _common(p, progress=True)
    p.set_defaults(handler=cmd_impute)


def _simulate_parser(subs: Any) -> None:
    p = subs.add_parser(
        "simulate",
        help="equally likely filled fields (realisations) of a NetCDF file",
        epilog=_SIMULATE_EPILOG,
        formatter_class=_FORMATTER,
        usage=f"{PROG} simulate [options] -n N IN [IN ...] OUT",
        description="Train as impute does (or load --model), then write N joint draws of every "
        "hole, given the observed values, to OUT, atomically.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="input file(s), Zarr store(s) or glob pattern(s), then the output file")
    p.add_argument("-n", "--realizations", type=int, metavar="N", help="number of realisations")
    p.add_argument("--first", type=int, metavar="I", help="number of the first realisation (default 0)")
    p.add_argument("--model", metavar="M.pt", help="draw from a model saved by impute --save-model, fitted on IN "
                   "(no training)")
    _engine_flags(p)
    _impute_options(p)
    _common(p, progress=True)
    p.set_defaults(handler=cmd_simulate)


def _info_parser(subs: Any) -> None:
    p = subs.add_parser(
        "info",
        help="what a file holds, for geogpvae",
        epilog=_INFO_EPILOG,
        formatter_class=_FORMATTER,
        usage=f"{PROG} info [options] IN [IN ...]",
        description="Candidate variables, coordinates and how they form the "
        "model's x, missing fractions, layout and a memory estimate.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="input file(s), Zarr store(s) or glob pattern(s)")
    _engine_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p)
    p.set_defaults(handler=cmd_info, epochs=None)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a share between 0 and 1, e.g. 0.1; got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"the share must lie strictly between 0 and 1, got {text}")
    return value


def _validate_parser(subs: Any) -> None:
    p = subs.add_parser(
        "validate",
        help="hold out some observed values, impute, and score them",
        epilog=_VALIDATE_EPILOG,
        formatter_class=_FORMATTER,
        usage=f"{PROG} validate [options] IN [IN ...]",
        description="Remove a share of each variable's observed values from the input (the model "
        "never trains on them), impute the rest as impute would, and print per variable the "
        "RMSE, MAE, NLL, 95 % coverage and mean squared standardised error of the removed values. "
        "Writes nothing.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="input file(s), Zarr store(s) or glob pattern(s)")
    _engine_flags(p)
    p.add_argument("--share", type=_share, default=0.1, help="share of each variable's observed values held "
                   "out (default 0.1)")
    p.add_argument("--gaps", choices=["random", "shaped", "blocks"], default="random", help="random (default), "
                   "in gaps shaped like each variable's missing values, or in whole spatial blocks")
    p.add_argument("--folds", type=int, default=None, metavar="K", help="k-fold cross-validation: every observed "
                   "value (or block) held out once, in K runs")
    p.add_argument("--block-size", type=float, default=None, metavar="SIDE", help="side of the blocks of --gaps "
                   "blocks, in the model's coordinates (cell steps on a grid, km for lon/lat)")
    _impute_options(p, only=("--log-vars", "--epochs", "--device", "--seed", "--progress"))
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p, progress=True)
    p.set_defaults(handler=cmd_validate)


def _predict_parser(subs: Any) -> None:
    p = subs.add_parser(
        "predict",
        help="predict at new locations with a saved model",
        epilog=_PREDICT_EPILOG,
        formatter_class=_FORMATTER,
        description="Predict every variable of a saved model (impute "
        "--save-model) at the locations of COORDS.nc.",
    )
    p.add_argument("model", metavar="MODEL.pt", help="a model saved by impute --save-model")
    p.add_argument("coords", metavar="COORDS.nc", help="the new locations (coordinates only)")
    p.add_argument("output", metavar="OUT.nc", help="the predictions and their std")
    _shared(p, "--device", help="auto (default: as saved), cpu, cuda or cuda:N")
    _shared(p, "--overwrite")
    _shared(p, "--progress", help="progress of the prediction (auto: a bar on a terminal, a line "
            "every 10 s otherwise)")
    p.add_argument("--chunks", metavar="DIM=N[,...]", help="predict and write block by block, N "
                   "locations along DIM per block (also the chunks of a Zarr OUT)")
    p.add_argument("--template", action="store_true", help="write OUT.zarr without values "
                   "(coordinates, attributes, empty variables chunked by --chunks) for --region jobs to fill")
    p.add_argument("--region", metavar="DIM=START:STOP[,...]", help="predict only these positions "
                   "of COORDS (0-based, STOP excluded, whole chunks) and write them into the existing "
                   "OUT.zarr made by --template; jobs with disjoint regions may run at once")
    _common(p, progress=True)
    p.set_defaults(handler=cmd_predict)


def _layer_list(text: str) -> list[int | float]:
    """``--layer``: layer numbers (integers) or coordinate values (with a decimal point)."""
    out: list[int | float] = []
    for v in (v.strip() for v in text.split(",")):
        if not v:
            continue
        try:
            out.append(int(v) if v.lstrip("+-").isdigit() else float(v))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"give layer numbers (counted from 1, e.g. 22 or 22,26,41) or --axis values "
                f"with a decimal point (e.g. 12.5); got {text!r}"
            ) from None
    if not out:
        raise argparse.ArgumentTypeError("give at least one layer")
    return out


def _isel_list(text: str) -> dict[str, int]:
    """``--isel``: ``DIM=I`` pairs, 0-based indices, separated by commas."""
    out: dict[str, int] = {}
    for item in (v.strip() for v in text.split(",")):
        dim, sep, index = item.partition("=")
        if not sep or not dim.strip() or not index.strip().lstrip("+-").isdigit():
            raise argparse.ArgumentTypeError(
                f"give DIM=INDEX pairs with 0-based indices, e.g. time=3 or time=3,member=0; got {text!r}"
            )
        out[dim.strip()] = int(index)
    return out


def _plot_parser(subs: Any) -> None:
    p = subs.add_parser(
        "plot",
        help="plot an imputed file",
        epilog=_PLOT_EPILOG,
        formatter_class=_FORMATTER,
        description="Layer slices, a map, uncertainty panels or a residual variogram of an "
        "imputed variable, as PNG, PDF or SVG (by the extension of -o).",
    )
    p.add_argument("input", metavar="OUT.nc", help="a file written by geogpvae impute")
    p.add_argument("--var", help="variable (default: the first imputed one)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument(
        "--layer",
        type=_layer_list,
        metavar="L[,L...]",
        help="layer slices: layer numbers counted from 1 (or the file's layer coordinate, "
        "e.g. SPE10's), or --axis values with a decimal point (e.g. 12.5)",
    )
    kind.add_argument("--map", action="store_true", help="a map of the field and its std")
    kind.add_argument("--uncertainty", action="store_true", help="uncertainty panels")
    kind.add_argument("--residual-variogram", action="store_true", help="semivariogram of the "
                      "standardized residuals at the imputed cells (needs --truth)")
    p.add_argument("--axis", help="dim to slice layers along (default: z, else a vertical dim "
                   "such as depth, else the first dim that is not horizontal, e.g. time)")
    p.add_argument("--isel", type=_isel_list, metavar="DIM=I[,DIM=I]", help="a map of this "
                   "slice of the other dims, 0-based (default: the first of each), e.g. time=3; "
                   "with --layer, the slice of the dims a layer cannot show")
    p.add_argument("--no-outlines", action="store_true", help="maps: no outlines around the "
                   "imputed cells (by default drawn only where cells are large enough to show them)")
    p.add_argument("--truth", metavar="TRUTH.nc", help="the complete field, for error panels")
    p.add_argument(
        "-o", "--output", required=True, metavar="FIG", help="figure file (.png, .pdf, ...)"
    )
    p.add_argument(
        "--dpi", type=int, default=150, help="resolution of raster formats (default 150)"
    )
    _shared(p, "--overwrite", help="replace an existing figure")
    _common(p)
    p.set_defaults(handler=cmd_plot)


def _demo_parser(subs: Any) -> None:
    p = subs.add_parser(
        "demo",
        help="impute a built-in synthetic field and score it",
        epilog=_DEMO_EPILOG,
        formatter_class=_FORMATTER,
        description="The built-in default job: a synthetic 3-variable "
        "Gaussian-process field with half of its values hidden is imputed; "
        "prints RMSE against mean imputation and the 95% interval coverage.",
    )
    p.add_argument("output", nargs="?", metavar="OUT.nc", help="also write the imputed field")
    p.add_argument(
        "--shape", default="48,48", help="grid shape, 1 to 4 sizes, comma separated (default 48,48)"
    )
    p.add_argument(
        "--engine", choices=["spa", "hpa"], default="spa", help="GP prior approximation (default spa)"
    )
    p.add_argument("--epochs", type=int, default=60, help="training epochs (default 60)")
    p.add_argument(
        "--missing", type=float, default=0.5, help="fraction of values hidden (default 0.5)"
    )
    _shared(p, "--seed", default=0, help="seed of the field, the holes and the model (default 0)")
    _shared(p, "--device", default="auto")
    _shared(p, "--progress")
    _shared(p, "--option", help="any engine option, repeatable (e.g. neighbours=10, threads=1)")
    _shared(p, "--overwrite")
    _common(p, progress=True)
    p.set_defaults(handler=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The ``geogpvae`` argument parser."""
    parser = _Parser(
        prog=PROG,
        formatter_class=_FORMATTER,
        description="Fill the holes in spatial fields with neighbour-driven GP variational "
        "autoencoders, with their uncertainty.",
        epilog=f"examples:\n  {PROG} demo\n  {PROG} info in.nc\n  {PROG} impute in.nc out.nc "
        f"--vars a,b\n  {PROG} plot out.nc --var a -o a.png\n\n"
        f"'{PROG} COMMAND --help' describes each command.",
    )
    parser.add_argument("--version", action="version", version=_version_text())
    parser.add_argument("--debug", action="store_true", default=False, help=argparse.SUPPRESS)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for add in (_impute_parser, _simulate_parser, _info_parser, _validate_parser, _predict_parser, _plot_parser, _demo_parser):
        add(subs)
    return parser


def _version_text() -> str:
    return f"{PROG} {__version__} (Python {sys.version.split()[0]})"


