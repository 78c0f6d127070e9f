"""``geogpvae validate``: hold out a share of the observed values, impute the rest, score them."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from typing import Any

from ..validation import clustered_gaps_note, few_scored_note
from .common import EXIT_OK, _check_device, _progress
from .files import _open, expand_inputs
from .impute import _transform
from .settings import resolve_settings


def _table(files: Sequence[str], scores: Any) -> str:
    gaps, folds = scores.attrs["geogpvae_validation_gaps"], scores.attrs.get("geogpvae_validation_folds", 0)
    if "geogpvae_validation_block_size" in scores.attrs:
        gaps += f" of side {scores.attrs['geogpvae_validation_block_size']:.3g}"
    held = (f"held out: each observed value once, in {folds} folds ({gaps}); scored on them, never trained on"
            if folds else f"held out: {scores.attrs['geogpvae_validation_share']:g} of each variable's observed "
            f"values ({gaps}); scored on them, never trained on")
    lines = [f"input: {', '.join(files)}", held,
             (f"{'variable':16s} {'n':>6s} {'RMSE':>11s} {'MAE':>11s} {'NLL':>8s} {'cov95':>6s} {'range':>9s} "
              f"{'z2':>6s}  units; space of NLL, cov95, z2")]
    for v in scores.variable.values:
        r = scores.sel(variable=v)
        lines.append(f"{v!s:16s} {int(r.n):6d} {float(r.rmse):11.4g} {float(r.mae):11.4g} {float(r.nll):8.3f} "
                     f"{float(r.cov95):6.3f} {float(r.cov95_low):4.2f}-{float(r.cov95_high):4.2f} {float(r.z2):6.2f}  "
                     f"{r.units.item() or '-'}; {r.space.item()}")
    lines.append("cov95: share inside the 95 % intervals (nominal 0.95), and the range where the true "
                 "coverage lies at 95 % confidence given n; z2: mean squared standardised "
                 "error (nominal 1; above 1, the intervals are too narrow by that factor in variance). "
                 "RMSE and MAE are in the variable's units; for a variable modelled in log space, "
                 "NLL, cov95 and z2 are those of its log")
    clustered = json.loads(scores.attrs.get("geogpvae_clustered_gaps", "[]"))
    if clustered and scores.attrs["geogpvae_validation_gaps"] == "random":
        lines.append(f"note: {clustered_gaps_note(clustered)}")
    few = few_scored_note(scores)
    if few:
        lines.append(f"note: {few}")
    return "\n".join(lines)


def _json_value(value):
    """A score as JSON holds it: null where it is NaN (no value scored), which JSON has no word for."""
    return None if isinstance(value, float) and math.isnan(value) else value


def cmd_validate(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae validate``."""
    import warnings

    from ..validation import validate

    settings = resolve_settings(args, needs_output=False)
    _check_device(settings.device)
    files = expand_inputs(settings.inputs)
    options = dict(settings.options)
    transform = _transform(options.pop("transform", None), settings.log_vars)
    progress = _progress(settings.progress if not (args.json and settings.progress == "auto") else "none")
    with _open(files, settings.concat_dim, settings.vars) as ds, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="the gaps of .* cluster")  # the table says it
        warnings.filterwarnings("ignore", message="few held-out values scored")
        scores = validate(ds, settings.vars, share=args.share, gaps=args.gaps, folds=args.folds,
                          block_size=args.block_size, seed=settings.seed,
                          progress=progress, engine=settings.engine, neighbours=settings.neighbours,
                          coords=settings.coords, mask=settings.mask_var, transforms=transform,
                          epochs=settings.epochs, device=settings.device, **options)
    if args.json:
        rows = {str(v): {k: _json_value(scores[k].sel(variable=v).item())
                         for k in ("n", "rmse", "mae", "nll", "crps", "cov95", "cov95_low", "cov95_high", "z2", "units",
                                   "space")}
                for v in scores.variable.values}
        clustered = json.loads(scores.attrs.get("geogpvae_clustered_gaps", "[]"))
        print(json.dumps({"input": files, "share": args.share, "gaps": args.gaps, "folds": args.folds,
                          "block_size": scores.attrs.get("geogpvae_validation_block_size"), "clustered_gaps": clustered,
                          "variables": rows}, indent=2, allow_nan=False))
    else:
        print(_table(files, scores))
    return EXIT_OK
