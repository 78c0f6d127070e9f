"""``geogpvae info``: what the toolkit sees in a file and the memory a run would need."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .common import EXIT_OK
from .files import _open, expand_inputs
from .settings import Settings, resolve_settings

__all__ = ["estimate_memory"]


def estimate_memory(config: Any, n_points: int, n_vars: int, n_dims: int, cells: int) -> dict[str, int]:
    """Bytes an ``impute`` run needs at its peak, by part.

    Parameters
    ----------
    config : GPVAEConfig
    n_points, n_vars, n_dims : int
        Locations inside the domain (N), variables (K), columns of x (D).
    cells : int
        Cells of the variables' full shape (the output grid).

    Returns
    -------
    dict of str to int
        :func:`~geogpvae.engine.resources.memory_parts` of the fit, calibration and prediction,
        ``assembled`` (the output's mean, standard deviation and flag variables) and ``total``.
    """
    from ..engine.resources import memory_parts

    parts = memory_parts(config, n_points, n_vars, n_dims)
    parts["assembled"] = 17 * cells * n_vars
    parts["total"] += parts["assembled"]
    return parts


def _exclusion_reason(ds: Any, name: str, chosen: Sequence[str]) -> str:
    import numpy as np

    var = ds[name]
    if not np.issubdtype(var.dtype, np.number):
        return f"not numeric ({var.dtype})"
    if not var.dims:
        return "a scalar"
    if any(a in var.attrs for a in ("flag_values", "flag_meanings", "flag_masks")):
        return "a flag variable"
    for suffix in ("_std", "_imputed"):
        if name.endswith(suffix) and name[: -len(suffix)] in ds.data_vars:
            return f"output of an earlier run ({suffix[1:]} of {name[: -len(suffix)]})"
    if chosen and set(var.dims) != set(ds[chosen[0]].dims):
        return f"on other dims {tuple(map(str, var.dims))}"
    return "used as coordinate, mask, bounds or other reference"


def _missing_fraction(ds: Any, name: str, domain: Any) -> float:
    null = ds[name].isnull()
    if domain is None:
        return float(null.mean())
    inside = int(domain.sum())
    return float((null & domain).sum()) / inside if inside else float("nan")


def describe_input(ds: Any, settings: Settings) -> dict[str, Any]:
    """What :func:`cmd_info` reports, as a JSON-friendly dict."""
    import xarray as xr

    from ..engine.config import GPVAEConfig
    from ..engine.resources import _cores, available_memory, check_declared_size, estimate_seconds, fit_speed
    from ..fields.cf import already_imputed
    from ..fields.coordinates import choose_coordinates
    from ..fields.geometry import build_geometry
    from ..fields.stacking import domain_mask
    from ..fields.variables import select_variables, variable_dims

    mask = [settings.mask_var] if settings.mask_var else []
    exclude = mask + list(settings.coords or [])
    names = select_variables(ds, settings.vars, exclude=exclude)
    check_declared_size(ds, names + mask)  # before any value is read
    dims = variable_dims(ds, names)
    chosen = choose_coordinates(ds, dims, settings.coords)
    options = {k: v for k, v in settings.options.items() if k not in ("transform", "coord_scale")}
    geometry = build_geometry(ds, chosen, settings.options.get("coord_scale"))
    config = GPVAEConfig().replace(
        engine=settings.engine, neighbours=settings.neighbours, epochs=settings.epochs, **options
    )
    sizes = {d: int(ds.sizes[d]) for d in dims}
    cells = int(math.prod(sizes.values()))
    domain = None
    if settings.mask_var:
        domain = xr.DataArray(domain_mask(ds, settings.mask_var, dims), dims=dims)
    n = cells if domain is None else int(domain.sum())
    never = _never_observed(ds, geometry, dims, names, domain, masked=bool(settings.mask_var))
    d, k = geometry.n_columns, len(names)
    cores = _cores(config)
    speed = fit_speed(config)  # after the checks: a few tenths of a second of the fit's kind of work
    return {
        "dims": sizes,
        # one dim is a 1-D grid (a series, a transect) when its own coordinate places it
        "layout": "scattered" if len(dims) == 1 and any(c != dims[0] for c, _ in chosen) else "gridded",
        "locations": n,
        "cells": cells,
        **_variables_report(ds, names, domain),
        "already_imputed": already_imputed(ds, names),
        "never_observed": never,
        "coordinates": [{"name": n_, "role": r} for n_, r in chosen],
        "x": {"columns": d, "description": geometry.describe()},
        "engine": _engine_report(config, n),
        "memory_bytes": estimate_memory(config, n, k, d, cells),
        "memory_available_bytes": available_memory(),
        "seconds": round(estimate_seconds(config, n, k, d, speed=speed), 1),
        "speed_factor": round(speed, 2),
        "cores": cores,
    }


def _never_observed(ds: Any, geometry: Any, dims: Sequence[str], names: Sequence[str], domain: Any,
                    masked: bool) -> dict[str, Any] | None:
    """Places with no value at any time, as impute's warning counts them (with its text)."""
    from types import SimpleNamespace

    import numpy as np

    from ..fields.never_observed import never_observed, never_observed_text
    from ..fields.placeholders import placeholder_places

    observed = np.logical_or.reduce([ds[v].notnull().transpose(*dims).values for v in names])
    inside = np.ones(observed.shape, dtype=bool) if domain is None else domain.transpose(*dims).values
    blank = placeholder_places(ds, SimpleNamespace(geometry=geometry, dims=tuple(dims)))
    found = never_observed(ds, geometry, dims, observed, inside, blank)
    text = never_observed_text(ds, names, found, masked)
    if found is None or text is None:
        return None
    return {"places": list(found.places), "count": found.count, "of": found.total, "warning": text}


def _variables_report(ds: Any, names: Sequence[str], domain: Any) -> dict[str, Any]:
    """The chosen variables (dtype, units, missing fraction) and why the others are left out."""
    return {
        "variables": {
            v: {
                "dtype": str(ds[v].dtype),
                "units": ds[v].attrs.get("units"),
                "missing": _missing_fraction(ds, v, domain),
            }
            for v in names
        },
        "other_variables": {
            str(v): _exclusion_reason(ds, str(v), names)
            for v in ds.data_vars
            if str(v) not in names
        },
    }


def _engine_report(config: Any, n: int) -> dict[str, Any]:
    """The engine settings a run on ``n`` locations would use."""
    return {
        "engine": config.engine,
        "neighbours": config.neighbours,
        "epochs": config.n_epochs(n),
        "default_epochs": config.short_of_default(n),  # set where an explicit budget is under half of it
        "batch_size": config.batch_for(n),
        "dtype": config.dtype,
        "context": list(config.context_scales),
    }


def _info_text(files: Sequence[str], info: Mapping[str, Any]) -> str:
    dims = " \u00d7 ".join(f"{d} {s}" for d, s in info["dims"].items())
    lines = [
        f"input: {', '.join(files)}",
        f"layout: {info['layout']} ({dims}); {info['locations']} locations to model",
    ]
    lines.append("variables imputed by default (or as chosen):")
    for name, v in info["variables"].items():
        units = f" [{v['units']}]" if v["units"] else ""
        lines.append(f"  {name}{units}: {v['dtype']}, {v['missing']:.1%} missing")
    for name, reason in info["other_variables"].items():
        lines.append(f"  (not imputed) {name}: {reason}")
    if info["already_imputed"]:
        done = info["already_imputed"]
        lines.append(
            f"note: {', '.join(done)} already went through impute (the _imputed flags mark filled "
            "cells): impute and validate refuse them; give the data as it was before imputing"
        )
    if info["never_observed"]:
        lines.append(f"note: {info['never_observed']['warning']}")
    coords = ", ".join(f"{c['name']} ({c['role']})" for c in info["coordinates"])
    lines.append(f"coordinates: {coords}")
    lines.append(f"model x: {info['x']['columns']} column(s): {info['x']['description']}")
    e = info["engine"]
    lines.append(
        f"run: engine {e['engine']}, {e['neighbours']} neighbours, {e['epochs']} epochs "
        f"of batches of {e['batch_size']}, {e['dtype']}"
        + ("" if e["default_epochs"] is None else f" (under half of the default budget's {e['default_epochs']} epochs)")
    )
    lines += _memory_text(info["memory_bytes"], info["memory_available_bytes"], e)
    lines.append(_time_text(info["seconds"], info["speed_factor"], info["cores"]))
    return "\n".join(lines)


def _memory_text(m: Mapping[str, int], available: int, engine: Mapping[str, Any]) -> list[str]:
    """The memory estimate, and a note where the memory available is short of it."""
    from ..engine.resources import format_bytes as size

    lines = [
        f"memory estimate: about {size(m['total'])} at the peak of fit, calibration and prediction on the CPU "
        f"(Python and PyTorch {size(m['baseline'])}, field {size(m['field'])}, a training step "
        f"{size(m['training'])}, a prediction chunk {size(m['prediction'])}, outputs "
        f"{size(m['outputs'] + m['assembled'])}); "
        f"an estimate, within about 1.5x; {size(available)} available here",
    ]
    if m["total"] - m["baseline"] > available:
        lines.append(
            f"note: impute would refuse this run here: lower --neighbours ({engine['neighbours']}) or the batch "
            f"size (--option batch_size=..., now {engine['batch_size']}), or use a machine with more memory")
    return lines


def _time_text(seconds: float, speed: float, cores: int) -> str:
    """The time estimate, with what the speed check found."""
    pace = ("as fast as" if 0.8 <= speed <= 1.25 else
            f"{speed:.1f} times slower than" if speed > 1 else f"{1 / speed:.1f} times faster than")
    return (f"time estimate: about {_duration(seconds)} on {cores} CPU core{'s' if cores != 1 else ''} here "
            f"(a speed check just now ran {pace} an idle two-core reference machine; rough, within about 2x; "
            "a GPU is faster)")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def cmd_info(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae info``."""
    settings = resolve_settings(args, needs_output=False)
    files = expand_inputs(settings.inputs)
    with _open(files, settings.concat_dim) as ds:
        info = describe_input(ds, settings)
    if args.json:
        print(json.dumps({"input": files, **info}, indent=2, default=str))
    else:
        print(_info_text(files, info))
    return EXIT_OK


