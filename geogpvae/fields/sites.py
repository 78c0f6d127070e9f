"""Station networks: which columns of a field's ``x`` place its sites."""

from __future__ import annotations

from collections.abc import Sequence

import xarray as xr

from .geometry import Geometry
from .never_observed import is_time_axis

__all__ = ["network_sites"]


def network_sites(ds: xr.Dataset, geometry: Geometry, dims: Sequence[str]) -> tuple[int, ...] | None:
    """The columns of ``x`` that place a station, for a ``(time, station)`` field; else None.

    A field is a station network when it lies on two dims, one coordinate is time along one of
    them, and every other coordinate lies along the other dim alone without being its dimension
    coordinate (``lat(station)``, ``x(station)``): the same sites, measured again and again. A
    grid on ``(time, x)`` is not one: its ``x`` is a dimension coordinate along which the model
    interpolates.

    Parameters
    ----------
    ds : xarray.Dataset
    geometry : Geometry
    dims : sequence of str
        The variables' dims.

    Returns
    -------
    tuple of int or None
    """
    if len(dims) != 2:
        return None
    columns, start = [], 0
    time_dims = set()
    for axis in geometry.axes:
        span = range(start, start + axis.width)
        start += axis.width
        own = [tuple(map(str, ds[n].dims)) if n in ds.variables else (n,) for n in axis.names]
        if is_time_axis(ds, axis):
            if len(own) != 1 or len(own[0]) != 1:
                return None
            time_dims.add(own[0][0])
            continue
        if any(len(d) != 1 or d[0] == n for d, n in zip(own, axis.names)):
            return None  # a dimension coordinate, or a coordinate on both dims: a grid
        columns.append((own[0][0], list(span)))
    if len(time_dims) != 1 or not columns:
        return None
    site_dims = {d for d, _ in columns}
    if len(site_dims) != 1 or site_dims & time_dims or site_dims | time_dims != set(dims):
        return None
    return tuple(c for _, span in columns for c in span)
