"""Places with no value at any time step: land in an ocean grid, or a hole in every image.

A gridded field with a time axis can hold places where no variable has a value at any time.
Without a mask they are filled like gaps, from neighbours alone, although they often lie
outside the domain; :func:`never_observed_warning` says so and proposes a mask variable of
the Dataset when one matches them. Pure numpy/xarray.
"""

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
    """Whether ``var`` is a CF flag variable.

    Parameters
    ----------
    var : xarray.DataArray

    Returns
    -------
    bool
        True where it has ``flag_values``, ``flag_meanings`` or ``flag_masks`` (CF section 3.5).
    """
    return "flag_values" in var.attrs or "flag_meanings" in var.attrs or "flag_masks" in var.attrs


#: the share of locations never observed along a time axis above which a warning proposes a mask
NEVER_OBSERVED_SHARE = 0.01


class NeverObserved(NamedTuple):
    """Places of a gridded field with a time axis that hold no value at any time.

    Attributes
    ----------
    places : tuple of str
        The dims that are not time, e.g. ``("lat", "lon")``.
    times : tuple of str
        The time dims, sorted.
    count : int
        Places inside the domain (at some time) with no value of any variable at any time,
        placeholders not counted.
    total : int
        Places inside the domain at some time.
    seen : ndarray of bool, shape of ``places``
        Where some variable has a value at some time.
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
        The input, whose coordinates say which axes of ``geometry`` are time.
    geometry : Geometry
        The field's coordinates (:func:`~geogpvae.fields.geometry.build_geometry`).
    dims : sequence of str
        The variables' dims; ``observed`` and ``domain`` are on them, in this order.
    observed : ndarray of bool
        True where some variable has a value.
    domain : ndarray of bool
        True inside the domain (everywhere without a mask).
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
    """The warning about :func:`never_observed` places, or None where there are none or fewer
    than :data:`NEVER_OBSERVED_SHARE` of the places in the domain.

    Without a mask (``masked`` False) it proposes one, naming a variable of ``ds`` on the
    places that could serve (not one of ``names``) where there is one; with a mask it says
    that the places it keeps are filled from other places alone.
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

    A gridded field with a time axis whose cells, at some places, hold no value of any variable
    at any time step: those places are filled like gaps, from neighbours alone, although they
    are often outside the domain (land, cells outside a reservoir). Where a mask was given, the
    places it keeps that have no value at any time (a satellite's pole hole) are reported
    instead: they are filled, but from other places only.

    Parameters
    ----------
    ds : xarray.Dataset
        The input, searched for a variable on the places' dims that could serve as the mask.
    field : Field
        Its stacked field: ``values`` (N, K) at the N cells of ``field.domain`` (shape
        ``field.shape``), in C order over ``field.dims``.
    placeholders : tuple or None
        :func:`~geogpvae.fields.placeholders.placeholder_places` of the field: not counted.
    masked : bool
        Whether the user gave the domain (a mask): places outside it are not counted, and
        the text says the places lie inside the mask instead of proposing one.

    Returns
    -------
    str or None
        :func:`never_observed_text` of the field's :func:`never_observed` places.
    """
    observed = np.zeros(int(np.prod(field.shape)), dtype=bool)
    observed[field.index] = (~np.isnan(field.values)).any(axis=1)
    found = never_observed(ds, field.geometry, field.dims, observed.reshape(field.shape),
                           field.domain.reshape(field.shape), placeholders)
    return never_observed_text(ds, field.names, found, masked)


def is_time_axis(ds: xr.Dataset, axis: Any) -> bool:
    """Whether an axis of a field's geometry is time.

    Parameters
    ----------
    ds : xarray.Dataset
        The input, holding the axis' coordinate.
    axis : Axis
        One of :attr:`~geogpvae.fields.geometry.Geometry.axes`.

    Returns
    -------
    bool
        True for dates or durations, and for numbers a CF coordinate marks as time
        (``axis = "T"``, ``standard_name = "time"``, e.g. World Ocean Atlas' "months since"
        that xarray leaves undecoded); False for longitude/latitude pairs.
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
