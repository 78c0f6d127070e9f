"""Places with no value at any time step: land in an ocean grid, or a hole in every image."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import xarray as xr

from .coordinates import coordinate_role
from .geometry import Geometry


#: what this module is handed (kept untyped here: importing it would be an import cycle)
Field = Any

__all__ = [
    "NEVER_OBSERVED_SHARE",
    "NeverObserved",
    "is_flag",
    "is_time_axis",
    "never_observed",
    "never_observed_text",
    "never_observed_warning",
]


def is_flag(var: xr.DataArray) -> bool:
    """Whether ``var`` is a CF flag variable (``flag_values``, ``flag_meanings`` or ``flag_masks``).

    Parameters
    ----------
    var : xarray.DataArray

    Returns
    -------
    bool
    """
    return "flag_values" in var.attrs or "flag_meanings" in var.attrs or "flag_masks" in var.attrs


#: the share of locations never observed along a time axis above which a warning proposes a mask
NEVER_OBSERVED_SHARE = 0.01


class NeverObserved(NamedTuple):
    """Places of a gridded field with a time axis that hold no value at any time.

    Attributes
    ----------
    places, times : tuple of str
        The dims that are not time, and the time dims (sorted).
    count : int
        Places in the domain never observed, placeholders not counted.
    total : int
        Places in the domain at some time.
    seen : ndarray of bool, shape of ``places``
    """

    places: tuple[str, ...]
    times: tuple[str, ...]
    count: int
    total: int
    seen: np.ndarray


def never_observed(ds: xr.Dataset, geometry: Geometry, dims: Sequence[str], observed: np.ndarray,
                   domain: np.ndarray, placeholders: tuple[tuple[str, ...], np.ndarray] | None = None,
                   ) -> NeverObserved | None:
    """Count the places with no value at any time.

    Parameters
    ----------
    ds : xarray.Dataset
    geometry : Geometry
    dims : sequence of str
        The dims of ``observed`` and ``domain``.
    observed, domain : ndarray of bool
    placeholders : tuple or None
        :func:`~geogpvae.fields.placeholders.placeholder_places`: not counted.

    Returns
    -------
    NeverObserved or None
        None where no dim is time, or every dim is.
    """
    times = {str(d) for a in geometry.axes if is_time_axis(ds, a)
             for d in (ds[a.names[0]].dims if a.names[0] in ds.variables else (a.names[0],))}
    along = tuple(i for i, d in enumerate(dims) if d in times)
    if not along or len(along) == len(dims):
        return None
    seen = observed.any(axis=along)
    inside = domain.any(axis=along)  # in the domain at some time
    places = tuple(str(d) for d in dims if d not in times)
    blank = placeholders  # NEMO's cells without a position: a warning of their own
    unexplained = inside & ~seen if blank is None or blank[0] != places else inside & ~seen & ~blank[1]
    return NeverObserved(places, tuple(sorted(times)), int(unexplained.sum()), int(inside.sum()), seen)


def never_observed_text(ds: xr.Dataset, names: Sequence[str], found: NeverObserved | None,
                        masked: bool = False) -> str | None:
    """The warning about :func:`never_observed` places, proposing a mask variable of ``ds``.

    Parameters
    ----------
    ds : xarray.Dataset
    names : sequence of str
        The imputed variables (never proposed as mask).
    found : NeverObserved or None
    masked : bool
        A mask was given: the text says the places inside it are filled from others alone.

    Returns
    -------
    str or None
        None below :data:`NEVER_OBSERVED_SHARE` of the places.
    """
    if found is None or found.count == 0 or found.count < NEVER_OBSERVED_SHARE * found.total:
        return None
    count = (f"{found.count} of the {found.total} ({', '.join(found.places)}) places"
             f"{' inside the mask' if masked else ''} ({found.count / found.total:.0%}) have no value at "
             f"any {', '.join(found.times)}")
    if masked:  # the user drew the domain: a persistent gap inside it, filled from other places only
        return (f"{count}: they are filled from other places alone, as a gap of the whole record "
                "(their _std says how far that reaches); if they lie outside the domain, leave them "
                "out of the mask")
    hint = _mask_hint(ds, names, found.places, found.seen)
    return (f"{count}: they are filled like gaps, from neighbours alone. If they are land or outside "
            f"the domain, pass a mask (True where values belong{hint})")


def never_observed_warning(ds: xr.Dataset, field: Field,
                           placeholders: tuple[tuple[str, ...], np.ndarray] | None = None,
                           masked: bool = False) -> str | None:
    """The text of a warning about places with no value at any time (land in an ocean grid).

    Parameters
    ----------
    ds : xarray.Dataset
    field : Field
    placeholders : tuple or None
        :func:`~geogpvae.fields.placeholders.placeholder_places`: not counted.
    masked : bool
        Whether the user gave a mask.

    Returns
    -------
    str or None
    """
    observed = np.zeros(int(np.prod(field.shape)), dtype=bool)
    observed[field.index] = (~np.isnan(field.values)).any(axis=1)
    found = never_observed(ds, field.geometry, field.dims, observed.reshape(field.shape),
                           field.domain.reshape(field.shape), placeholders)
    return never_observed_text(ds, field.names, found, masked)


def is_time_axis(ds: xr.Dataset, axis: Any) -> bool:
    """Whether an axis of a field's geometry is time (dates, durations, or numbers CF marks as time).

    Parameters
    ----------
    ds : xarray.Dataset
    axis : Axis
        One of :attr:`~geogpvae.fields.geometry.Geometry.axes`.

    Returns
    -------
    bool
    """
    if axis.kind in ("time", "cftime", "duration"):
        return True
    name = axis.names[0]
    return axis.kind != "sphere" and name in ds.variables and coordinate_role(name, ds[name]) == "time"


def _zeros_and_ones(var: xr.DataArray) -> bool:
    """Floats that are all 0 or 1, as ROMS stores ``mask_rho``."""
    if var.dtype.kind != "f":
        return False
    values = np.asarray(var.values)
    return bool(np.isin(values, (0.0, 1.0)).all())


def _mask_hint(ds: xr.Dataset, names: Sequence[str], places: tuple[str, ...], seen: np.ndarray) -> str:
    """A variable on ``places`` non-zero, or zero, just where values were seen (for the mask advice)."""
    candidates = list(ds.data_vars.items()) + [(n, c) for n, c in ds.coords.items() if n not in ds.dims]
    for name, var in candidates:
        if (name in names or set(map(str, var.dims)) != set(places)
                or not (is_flag(var) or var.dtype.kind in "biu" or _zeros_and_ones(var))):
            continue
        inside = np.asarray(var.transpose(*places).values) != 0
        for where, text in ((inside, f"mask={name!r} / --mask-var {name}"), (~inside, f"mask=ds[{name!r}] == 0")):
            # every observed place inside, and nearly every never-observed one outside
            if where[seen].all() and (~where[~seen]).mean() >= 0.9:
                return f", e.g. {text}"
    return "; on the command line --mask-var NAME"
