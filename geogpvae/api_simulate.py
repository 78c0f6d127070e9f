"""Realisations in xarray: what :func:`geogpvae.simulate` and :meth:`GPVAEImputer.simulate` write.

A realisation is one equally likely filled field: observed values as they are, every hole drawn
jointly with the others (:mod:`geogpvae.engine.realisations`), so that it keeps the texture of
the field where the mean is smooth. The draws share a new leading dim ``realization`` (CF
``standard_name: realization``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from .api_output import detached, provenance
from .engine.realisations import draw_realisations, simulation_plan
from .errors import InputError
from .fields.cf import IMPUTED_SUFFIX, STD_SUFFIX, imputation_variables
from .fields.stacking import Field

__all__ = ["REALIZATION_DIM", "check_count", "realisations"]

#: the dim of the realisations (CF's spelling of the standard name)
REALIZATION_DIM = "realization"

#: realisations drawn at once: bounds the memory of the latent draws
GROUP = 16


def check_count(n: Any, first: Any) -> tuple[int, int]:
    """``n`` and ``first`` as ints; InputError unless whole numbers, ``n >= 1`` and ``first >= 0``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n must be a whole number of realisations >= 1, got {n!r}")
    if isinstance(first, bool) or not isinstance(first, (int, np.integer)) or first < 0:
        raise InputError(f"first must be a whole number >= 0, got {first!r}")
    return int(n), int(first)


def realisations(imp: Any, ds: xr.Dataset, field: Field, n: int, *, seed: int | None = None,
                 first: int = 0) -> xr.Dataset:
    """``ds`` with each trained variable ``v`` as ``n`` realisations along ``realization`` and its
    flag ``v_imputed``; for :meth:`GPVAEImputer.simulate`."""
    n, first = check_count(n, first)
    eng = imp.engine_
    rows = np.arange(field.x.shape[0]) if field.fingerprint() == imp._fingerprint else eng.training_rows(
        field.x, field.values)
    if rows is None:
        raise InputError(
            "realisations are drawn of the field the model was fitted on, and this Dataset holds other "
            "locations or observed values: fit on it first (geogpvae.simulate(ds, n) does both)"
        )
    seed = eng.config.seed if seed is None else int(seed)
    plan = simulation_plan(eng, seed)
    draws = np.concatenate([draw_realisations(eng, plan, min(GROUP, first + n - s), first=s)[:, rows]
                            for s in range(first, first + n, GROUP)])
    return _assemble(imp, ds, field, draws, first, seed)


def _assemble(imp: Any, ds: xr.Dataset, field: Field, draws: np.ndarray, first: int, seed: int) -> xr.Dataset:
    replaced = {f"{v}{s}" for v in field.names for s in ("", STD_SUFFIX, IMPUTED_SUFFIX)}
    out = detached(ds, [v for v in ds.variables if v not in replaced])
    domain = xr.DataArray(field.domain, dims=field.dims)
    number = xr.Variable(REALIZATION_DIM, np.arange(first, first + len(draws)),
                         {"standard_name": "realization", "long_name": "number of the realisation"})
    for j, name in enumerate(field.names):
        log = field.transforms.get(name) == "log"
        zeros = np.zeros(field.shape)
        parts = []
        for r in range(len(draws)):
            made = imputation_variables(name, field.originals[name], field.unstack(draws[r], j), zeros,
                                        domain=domain, transform="log" if log else None)
            parts.append(made[name].variable)
        value = xr.Variable.concat(parts, dim=REALIZATION_DIM)
        value.attrs = dict(parts[0].attrs, ancillary_variables=name + IMPUTED_SUFFIX)
        value.attrs.pop("geogpvae_point_estimate", None)
        value.encoding = dict(parts[0].encoding)
        out[name] = value
        out[name + IMPUTED_SUFFIX] = made[name + IMPUTED_SUFFIX].variable
    out = out.assign_coords({REALIZATION_DIM: number})
    if not str(out.attrs.get("title", "")).strip():
        out.attrs["title"] = f"realisations of {', '.join(field.names)} by geogpvae"
    out = provenance(imp, out, call="simulate")
    out.attrs["geogpvae_realizations"] = f"{len(draws)} joint draws, numbers {first}-{first + len(draws) - 1}, seed {seed}"
    return out
