"""Places with no value at any time step: land in an ocean grid, or a hole in every image.

A gridded field with a time axis can hold places where no variable has a value at any time.
Without a mask they are filled like gaps, from neighbours alone, although they often lie
outside the domain; :func:`never_observed_warning` says so and proposes a mask variable of
the Dataset when one matches them. Pure numpy/xarray.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from .geometry import coordinate_role

if TYPE_CHECKING:
    from .stacking import Field

__all__ = ["NEVER_OBSERVED_SHARE", "is_flag", "is_time_axis", "never_observed_warning"]


def is_flag(var: xr.DataArray) -> bool:
    """Whether ``var`` is a CF flag variable (``flag_values``, ``flag_meanings`` or ``flag_masks``)."""
    return "flag_values" in var.attrs or "flag_meanings" in var.attrs or "flag_masks" in var.attrs


#: the share of locations never observed along a time axis above which a warning proposes a mask
NEVER_OBSERVED_SHARE = 0.01


def never_observed_warning(ds: xr.Dataset, field: Field,
                           placeholders: tuple[tuple[str, ...], np.ndarray] | None = None) -> str | None:
    """The text of a warning about places with no value at any time (land in an ocean grid).

    A gridded field with a time axis whose cells, at some places, hold no value of any variable
    at any time step: those places are filled like gaps, from neighbours alone, although they
    are often outside the domain (land, cells outside a reservoir).

    Parameters
    ----------
    ds : xarray.Dataset
        The input, searched for a variable on the places' dims that could serve as the mask.
    field : Field
        Its stacked field, all of ``ds``'s cells (no mask given): ``values`` (N, K) in C
        order over ``field.dims``.
    placeholders : tuple or None
        :func:`~geogpvae.fields.placeholders.placeholder_places` of the field: not counted.

    Returns
    -------
    str or None
        The warning's text, naming the never-observed places and a matching mask variable
        where there is one; None where the field has no time axis (or only one), no such
        place, fewer than :data:`NEVER_OBSERVED_SHARE` of the places, or rows that are not
        every cell (a mask was given). Placeholders have a warning of their own.
    """
    times = {str(d) for a in field.geometry.axes if is_time_axis(ds, a)
             for d in (ds[a.names[0]].dims if a.names[0] in ds.variables else (a.names[0],))}
    along = tuple(i for i, d in enumerate(field.dims) if d in times)
    if not along or len(along) == len(field.dims) or field.values.shape[0] != int(np.prod(field.shape)):
        return None
    seen = (~np.isnan(field.values)).any(axis=1).reshape(field.shape).any(axis=along)
    places = tuple(d for d in field.dims if d not in times)
    blank = placeholders  # NEMO's cells without a position: a warning of their own
    unexplained = ~seen if blank is None or blank[0] != places else ~seen & ~blank[1]
    never = int(unexplained.sum())
    if never == 0 or never < NEVER_OBSERVED_SHARE * seen.size:
        return None
    return (f"{never} of the {seen.size} ({', '.join(places)}) places ({never / seen.size:.0%}) have no "
            f"value at any {', '.join(sorted(times))}: they are filled like gaps, from neighbours alone. "
            f"If they are land or outside the domain, pass a mask (True where values belong"
            f"{_mask_hint(ds, field.names, places, seen)})")


def is_time_axis(ds: xr.Dataset, axis: Any) -> bool:
    """Dates or durations, or numbers a CF coordinate marks as time (``axis = "T"``,
    ``standard_name = "time"``, e.g. World Ocean Atlas' "months since" that xarray leaves
    undecoded)."""
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
    """A variable of ``ds`` on ``places`` that is non-zero (or zero) just where values were seen:
    integers, flags, or floats of 0 and 1 only; data variables first, then coordinates that
    are not dims."""
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
