"""``geogpvae predict``: predict at new locations with a saved model."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import EXIT_OK, PROG, Reporter, UsageError, _check_device, _progress
from .files import _open, check_target, expand_inputs, write_output


def _load_model(path: str, device: str | None, progress: bool | str = False) -> Any:
    from ..api import GPVAEImputer

    if not Path(path).is_file():
        raise FileNotFoundError(f"model file {path} not found")
    try:
        return GPVAEImputer.load(path, device=device, progress=progress)
    except (ValueError, KeyError, TypeError):
        raise
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise UsageError(
            f"{path} could not be loaded as a model written by '{PROG} impute --save-model' "
            f"({type(err).__name__})"
        ) from None


def cmd_predict(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae predict``."""
    say = Reporter(args.quiet)
    if args.device is not None:
        _check_device(args.device)
    coords = expand_inputs([args.coords])
    check_target(args.output, inputs=[args.model, *coords], overwrite=bool(args.overwrite))
    device = None if args.device in (None, "auto") else args.device
    progress = _progress(args.progress or ("none" if args.quiet else "auto"))
    imputer = _load_model(args.model, device, progress)
    with _open(coords, None) as ds:
        out = imputer.predict(ds)
        out.attrs["geogpvae_command"] = shlex.join([PROG, *argv])
        write_output(out, args.output, bool(args.overwrite))
    where = " \u00d7 ".join(f"{d} {n}" for d, n in out.sizes.items())
    say(f"wrote {args.output} ({', '.join(imputer.vars_)} at {where})")
    return EXIT_OK


