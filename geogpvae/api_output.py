"""What a trained :class:`~geogpvae.GPVAEImputer` (``imp``, every function's first argument) writes
back to xarray: ``v``, ``v_std``, ``v_imputed``, calibration attributes and provenance."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np
import xarray as xr

from .api_lazy import LazyPrediction, chunked_like
from .engine.config import GPVAEConfig
from .engine.core import Prediction
from .fields.cf import IMPUTED_SUFFIX, STD_SUFFIX, imputation_variables, output_dtype
from .fields.labelling import add_provenance, label_lon_lat, label_units
from .fields.stacking import Field

__all__ = ["assemble", "call_text", "detached", "predicted_variable", "provenance", "variance_factors"]


def detached(ds: xr.Dataset, names: Iterable[Hashable]) -> xr.Dataset:
    """``ds`` with its variables ``names`` copied, data and attributes: the result shares no memory
    with them (lazy data stay lazy and are read anew; index coordinates get indexes of their own)."""
    copies = {}
    for name in names:
        var = ds.variables[name]
        if type(ds.xindexes.get(name)) is xr.indexes.PandasIndex and var.dims == (name,):
            var = xr.Variable(var.dims, np.array(var.values, copy=True), var.attrs, var.encoding)
        copies[name] = var.copy(deep=True)
    out = ds.copy(deep=False)
    out.update(copies)
    return out


def assemble(imp: Any, ds: xr.Dataset, field: Field, pred: Prediction | LazyPrediction) -> xr.Dataset:
    """``ds`` with ``v``, ``v_std`` and ``v_imputed`` of every variable of ``field`` made from
    ``pred`` (dask-backed from a :class:`~geogpvae.api_lazy.LazyPrediction`), a title when it has
    none, and the provenance attributes of ``imp``; the variables passed through are copies
    (:func:`detached`)."""
    replaced = {f"{n}{suffix}" for n in field.names for suffix in ("", STD_SUFFIX, IMPUTED_SUFFIX)}
    out = detached(ds, [n for n in ds.variables if n not in replaced])
    domain = xr.DataArray(field.domain, dims=field.dims)
    for j, name in enumerate(field.names):
        log = field.transforms.get(name) == "log"
        filled, std = (pred.column(field, j) if isinstance(pred, LazyPrediction)
                       else (field.unstack(pred.mean, j), field.unstack(pred.std, j)))
        made = imputation_variables(
            name,
            field.originals[name],
            filled,
            std,
            domain=domain,
            transform="log" if log else None,
        )
        if log:
            made[name].attrs["geogpvae_point_estimate"] = "mean"
        made[name + STD_SUFFIX].attrs.update(variance_factors(imp, j))
        for key, var in made.items():  # on the copied coordinates, not those of ds; chunked as the input
            out[key] = chunked_like(var.variable, ds[name] if name in ds else None)
    if not str(out.attrs.get("title", "")).strip():  # CF 2.6.2: a file says what it holds
        out.attrs["title"] = f"{', '.join(field.names)} imputed by geogpvae"
    return provenance(imp, out)


def predicted_variable(
    imp: Any,
    name: str,
    pred: Prediction,
    j: int,
    dims: tuple[str, ...],
    shape: tuple[int, ...],
    coords: dict[str, Any],
) -> dict[str, xr.DataArray]:
    """``v`` and ``v_std`` of the trained variable ``name`` (column ``j`` of ``pred``) on the
    locations' ``dims``, ``shape`` and ``coords``, with its training attributes and dtype."""
    dtype = output_dtype(np.dtype(imp._dtypes[name]))
    empty = xr.DataArray(
        np.full(shape, np.nan, dtype=dtype), dims=dims, coords=coords, attrs=imp._attrs[name]
    )
    log = imp._transforms.get(name) == "log"
    made = imputation_variables(
        name,
        empty,
        pred.mean[:, j].reshape(shape),
        pred.std[:, j].reshape(shape),
        transform="log" if log else None,
    )
    value = made[name]
    ancillary = [
        a for a in value.attrs["ancillary_variables"].split() if a != name + IMPUTED_SUFFIX
    ]
    value.attrs["ancillary_variables"] = " ".join(ancillary)
    if log:
        value.attrs["geogpvae_point_estimate"] = "mean"
    made[name + STD_SUFFIX].attrs.update(variance_factors(imp, j))
    return {name: value, name + STD_SUFFIX: made[name + STD_SUFFIX]}


def variance_factors(imp: Any, j: int) -> dict[str, float]:
    """``v_std`` attributes: the calibration factors of variable ``j``'s predictive variance at locations
    with and without observed values of their own; none when calibration did not run."""
    eng = imp.engine_
    if eng.calibration_ is None or not eng.config.calibrate or eng.interrupted:
        return {}
    factors = np.atleast_2d(eng.calibration_)  # (2, K); (1, K) from a one-row calibration
    return {
        "geogpvae_variance_factor_observed": float(factors[0, j]),
        "geogpvae_variance_factor_unobserved": float(factors[min(1, len(factors) - 1), j]),
    }


def call_text(imp: Any, method: str) -> str:
    """The call that ``history`` records: ``method(...)`` with the options of ``imp``."""
    cfg = imp.config_
    parts = [
        f"vars={imp.vars_!r}",
        f"engine={cfg.engine!r}",
        f"neighbours={cfg.neighbours}",
        f"epochs={imp.epochs_run_}",
        f"seed={cfg.seed}",
    ]
    for key in ("coords", "transforms", "coord_scale"):
        value = getattr(imp, key)
        if value is not None:
            parts.append(f"{key}={value!r}")
    if imp.mask is not None:
        parts.append(
            f"mask={imp.mask!r}" if isinstance(imp.mask, str) else "mask=<DataArray>"
        )
    defaults = GPVAEConfig().to_dict()
    given = {k: v for k, v in cfg.to_dict().items() if k not in ("engine", "neighbours", "epochs", "seed", "device")}
    parts += [f"{k}={cfg.kernel_name if k == 'kernel' else repr(v)}" for k, v in given.items() if v != defaults[k]]
    return f"{method}({', '.join(parts)})"


def provenance(imp: Any, out: xr.Dataset, call: str = "impute") -> xr.Dataset:
    """``out`` with the coordinates' CF labels and the ``history`` and ``geogpvae_*``
    attributes of a run of ``imp`` (:func:`~geogpvae.fields.labelling.add_provenance`)."""
    cfg = imp.config_
    options = {
        "engine": cfg.engine,
        "neighbours": cfg.neighbours,
        "kernel": cfg.kernel_name,
        "epochs": imp.epochs_run_,
        "seed": cfg.seed,
        "vars": list(imp.vars_),
        "coordinates": imp.geometry_.describe(),
        "transform": {n: t for n, t in imp._transforms.items() if t},
        "config": cfg.to_dict(),
    }
    if imp.engine_ is not None:
        eng = imp.engine_
        options["threads"] = str(eng.threads_)
        if eng.kl_factor_ is not None:  # what beta="auto" chose, as a multiple of the base weight
            options["kl_factor"] = float(eng.kl_factor_)
        if len(eng.clustered_gaps_) == len(imp.vars_):  # known after a fit (or loaded; not in older files)
            options["clustered_gaps"] = [v for v, c in zip(imp.vars_, eng.clustered_gaps_) if c]
        if eng.site_levels_ is not None:  # a station network: how far apart its sites' own levels lie
            options["site_levels"] = {"sites": len(eng.site_levels_.sites), "sd": dict(
                zip(eng.names, map(float, np.sqrt(eng.site_levels_.between)), strict=True))}
        if eng.predict_mode_ is not None:  # predict_mode="auto": calibration's choice per regime
            options["predict_mode_chosen"] = eng.predict_mode_
        if eng.noise_:  # hidden_variance on: calibration's choice of added variance per regime
            options["noise_chosen"] = {r: dict(zip(eng.names, v, strict=True)) for r, v in eng.noise_.items()}
    for axis in imp.geometry_.axes:
        if axis.kind == "sphere":
            out = label_lon_lat(out, *axis.names)
        elif axis.kind == "linear" and axis.units:
            out = label_units(out, axis.names[0], axis.units)
    return add_provenance(out, call_text(imp, call), options)
