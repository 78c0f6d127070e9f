"""The choice between a map and a profile in :func:`~geogpvae.plot.field_map`."""

from __future__ import annotations

from collections.abc import Mapping

import xarray as xr
from matplotlib.figure import Figure

from .map_geometry import _find_sites, _other_dims
from .profiles import _as_profile, profile


def _profile_instead(ds: xr.Dataset, var: str, truth, f, coords: str, isel, log, figsize) -> Figure | None:
    """The profile :func:`~geogpvae.plot.field_map` draws instead (one dim, no sites; a site by ``isel``), or None."""
    if f.value.ndim == 1 and _find_sites(ds, f.value, coords) is None:
        return _as_profile(ds, var, truth, isel, log, figsize)
    if _picks_one_site(ds, f.value, coords, isel):  # one well's log, one station's series
        return _site_profile(ds, var, truth, f, isel, log, figsize)
    return None


def _picks_one_site(ds: xr.Dataset, da: xr.DataArray, coords: str, isel: Mapping[str, int] | None) -> bool:
    """Whether ``isel`` picks one site of a field on sites and one more dim, leaving that dim."""
    sites = _find_sites(ds, da, coords) if isel and da.ndim == len(isel) + 1 else None
    return sites is not None and sites[0] in isel and set(map(str, isel)) <= set(map(str, da.dims))


def _site_profile(ds: xr.Dataset, var: str, truth, f, isel: Mapping[str, int], log, figsize) -> Figure:
    """The profile of the site ``isel`` picks, titled with the picked indices or labels."""
    left = next(str(d) for d in f.value.dims if str(d) not in isel)
    sel, notes = _other_dims(f.value, (left,), isel)
    picked = None if truth is None else truth.isel(sel, missing_dims="ignore")
    fig = profile(ds.isel(sel), var, picked, log=log, figsize=figsize)
    fig.axes[0].set_title(f"{f.name} ({', '.join(notes)})")
    return fig
