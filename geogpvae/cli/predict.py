"""``geogpvae predict``: predict at new locations with a saved model."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import EXIT_OK, PROG, Reporter, UsageError, _check_device, _progress
from ..fields.zarr_io import check_region, is_zarr, to_zarr
from .files import _open, check_target, expand_inputs, write_output
from .regions import check_dims, parse_chunks, parse_region, region_of, store_chunks


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


def _check_flags(args: argparse.Namespace) -> tuple[dict[str, int] | None, dict[str, slice] | None]:
    """``--chunks``, ``--region`` and ``--template``, parsed and checked against each other."""
    chunks = parse_chunks(args.chunks) if args.chunks else None
    region = parse_region(args.region) if args.region else None
    if args.template and region:
        raise UsageError("--template makes the store that --region jobs fill: give one of them")
    if (args.template or region) and not is_zarr(args.output):
        raise UsageError("--template and --region write a Zarr store: name OUT *.zarr")
    if args.template and not chunks:
        raise UsageError("--template needs --chunks: each --region job writes whole chunks of the store")
    if region and chunks:
        raise UsageError("--region predicts in the chunks of the store: leave out --chunks")
    if region and args.overwrite:
        raise UsageError("--region writes into part of an existing store: --overwrite does not apply")
    return chunks, region


def cmd_predict(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae predict``."""
    say = Reporter(args.quiet)
    if args.device is not None:
        _check_device(args.device)
    chunks, region = _check_flags(args)
    coords = expand_inputs([args.coords])
    if region:
        check_target(args.output, inputs=[args.model, *coords], overwrite=True)
        store = check_region(args.output, region)
    else:
        check_target(args.output, inputs=[args.model, *coords], overwrite=bool(args.overwrite))
    device = None if args.device in (None, "auto") else args.device
    progress = _progress(args.progress or ("none" if args.quiet else "auto"))
    with _open(coords, None) as ds:
        check_dims(ds, chunks or region or {}, "--chunks" if chunks else "--region")
        if region:
            part = region_of(ds, store, region, args.output)
            imputer = _load_model(args.model, device, progress)
            to_zarr(imputer.predict(part, chunks=store_chunks(store, region)), args.output, region=region)
            where = ", ".join(f"{d} {p.start}:{p.stop}" for d, p in region.items())
            say(f"wrote {where} of {args.output} ({', '.join(imputer.vars_)})")
            return EXIT_OK
        imputer = _load_model(args.model, device, progress)
        out = imputer.predict(ds, chunks=chunks)
        out.attrs["geogpvae_command"] = shlex.join([PROG, *argv])
        write_output(out, args.output, bool(args.overwrite), compute=not args.template)
    where = " \u00d7 ".join(f"{d} {n}" for d, n in out.sizes.items())
    what = "the empty store" if args.template else ""
    say(f"wrote {what + ' ' if what else ''}{args.output} ({', '.join(imputer.vars_)} at {where})")
    return EXIT_OK
