"""``geogpvae demo``: impute a synthetic field with holes and score the result."""

from __future__ import annotations

import argparse
import math
import shlex
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import TrainingWarning
from .common import EXIT_OK, PROG, Reporter, UsageError, _check_device, _progress
from .files import check_target
from .impute import make_imputer
from .settings import Settings, _cli_options


def demo_scores(ds: Any, truth: Any, out: Any, names: Sequence[str]) -> dict[str, dict[str, float]]:
    """RMSE, mean-imputation RMSE and 95 % coverage at the hidden values, per variable and all."""
    import numpy as np

    rows: dict[str, dict[str, float]] = {}
    pooled: dict[str, list[Any]] = {"err": [], "mean": [], "z": []}
    for name in names:
        hidden = ds[name].isnull().values & truth[name].notnull().values
        t = truth[name].values[hidden]
        err = out[name].values[hidden] - t
        mean_err = float(np.nanmean(ds[name].values)) - t
        z = np.abs(err) / out[f"{name}_std"].values[hidden]
        rows[name] = _score_row(err, mean_err, z)
        for key, arr in zip(("err", "mean", "z"), (err, mean_err, z)):
            pooled[key].append(arr)
    rows["all"] = _score_row(*(np.concatenate(pooled[k]) for k in ("err", "mean", "z")))
    return rows


def _score_row(err: Any, mean_err: Any, z: Any) -> dict[str, float]:
    import numpy as np

    return {
        "rmse": float(np.sqrt(np.mean(err**2))),
        "rmse_mean_imputation": float(np.sqrt(np.mean(mean_err**2))),
        "coverage95": float(np.mean(z < 1.959964)),
        "hidden": int(err.size),
    }


def _demo_table(scores: Mapping[str, Mapping[str, float]]) -> str:
    lines = [f"{'variable':<10}{'hidden':>8}{'RMSE':>9}{'mean-fill RMSE':>16}{'95% coverage':>14}"]
    for name, s in scores.items():
        lines.append(
            f"{name:<10}{s['hidden']:>8d}{s['rmse']:>9.3f}"
            f"{s['rmse_mean_imputation']:>16.3f}{s['coverage95']:>14.1%}"
        )
    return "\n".join(lines)


_TIMES = " \u00d7 "


def _shape(text: str) -> tuple[int, ...]:
    """The grid shape of ``--shape``: 1 to 4 positive integers, comma separated."""
    parts = [p.strip() for p in str(text).split(",")]
    if not 1 <= len(parts) <= 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(
            f"--shape takes 1 to 4 positive integers separated by commas, e.g. 48,48; got {text!r}"
        )
    return tuple(int(p) for p in parts)


def cmd_demo(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae demo``."""
    from ..datasets import make_gaussian_field
    from ..fields.io import to_netcdf

    say = Reporter(args.quiet)
    shape = _shape(args.shape)
    if not 0 <= args.missing < 1:
        raise UsageError(f"--missing must be in [0, 1), got {args.missing}")
    _check_device(args.device)
    if args.output:
        check_target(args.output, inputs=[], overwrite=bool(args.overwrite))
    settings = Settings(
        engine=args.engine,
        epochs=args.epochs,
        seed=args.seed,
        device=args.device,
        options=_cli_options(args),
    )
    progress = _progress(args.progress or ("none" if args.quiet else "auto"))
    imputer = make_imputer(settings, args.device, progress)
    ds, truth = make_gaussian_field(shape, missing=args.missing, seed=args.seed, return_truth=True)
    names = [str(v) for v in ds.data_vars]
    config = imputer.engine_config()
    default = config.short_of_default(math.prod(shape))  # a quick run is the point: said, not warned
    say(
        f"synthetic field: {_TIMES.join(map(str, shape))} grid, {len(names)} variables, "
        f"{args.missing:.0%} hidden; engine {config.engine}, "
        f"{config.epochs} epochs" + ("" if default is None else f", a quick run ({PROG} impute would train {default} "
                                     "on a field this size)")
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrainingWarning)
        out = imputer.fit(ds).impute(ds)
    seconds = time.perf_counter() - start
    scores = demo_scores(ds, truth, out, names)
    print(_demo_table(scores))
    total = scores["all"]
    print(
        f"RMSE {total['rmse']:.3f} against {total['rmse_mean_imputation']:.3f} for mean "
        f"imputation; 95% interval coverage {total['coverage95']:.1%}; {seconds:.0f} s"
    )
    if args.output:
        out.attrs["geogpvae_command"] = shlex.join([PROG, *argv])
        to_netcdf(out, args.output, overwrite=bool(args.overwrite))
        say(f"wrote {args.output}")
    return EXIT_OK


