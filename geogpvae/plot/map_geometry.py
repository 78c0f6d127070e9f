"""Where the values of a map go and what each panel shows: the horizontal dims and centres,
the slice shown, the panels' arrays (and redrawing: sites on a lattice as a raster, a curvilinear
grid's cells as points).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from .cartography import _contiguous_lon
from .conventions import (
    _LAT_NAMES,
    _LON_NAMES,
    _X_NAMES,
    _Y_NAMES,
    _centres,
    _coord,
    _Field,
    _is_lat,
    _is_lon,
    _is_x,
    _is_y,
    _orient,
    _status,
)
from .curvilinear import _Curvilinear
from .style import _coord_note, _fmt_value, _scalar_notes


def _find_sites(ds: xr.Dataset, da: xr.DataArray, coords: str):
    """For scattered data: (site dim, horizontal name, vertical name, is_lonlat) or None."""
    names = {str(n).lower(): str(n) for n in ds.variables}
    pairs = []
    lonlat = [(names[a], names[b]) for a in _LON_NAMES for b in _LAT_NAMES
              if a in names and b in names]
    xy = [(names[a], names[b]) for a in _X_NAMES for b in _Y_NAMES if a in names and b in names]
    if coords in ("auto", "lonlat"):
        pairs += [(h, v, True) for h, v in lonlat]
    if coords in ("auto", "xy"):
        pairs += [(h, v, False) for h, v in xy]
    for h, v, is_ll in pairs:
        hd, vd = ds[h].dims, ds[v].dims
        if len(hd) == 1 and hd == vd and hd[0] in da.dims and hd[0] not in (h, v):
            return hd[0], h, v, is_ll
    return None


def _redrawn_as(ds: xr.Dataset, found: _Curvilinear | None, truth, f, coords: str, raster: bool):
    """``(ds, truth, coords)`` to draw instead (curvilinear cells as points, lattice sites as a grid), or None."""
    if found is not None and found.mesh is None:
        dims = tuple(str(d) for d in found.lon.dims)
        cells = {"_".join(dims): dims}
        # cells without a position (NaN centres, placeholders) are left out
        h, v = np.asarray(found.lon.values, dtype=float), np.asarray(found.lat.values, dtype=float)
        placed = {"_".join(dims): (np.isfinite(h + v) & ~found.blank).reshape(-1)}
        return (ds.stack(cells, create_index=False).isel(placed),
                None if truth is None else truth.stack(cells, create_index=False).isel(placed), coords)
    return _lattice_of(f, coords) if raster else None


def _lattice_axis(c: np.ndarray) -> tuple[float, float, int] | None:
    """(first, step, count) when the values lie on an evenly spaced line, else None."""
    c = c[np.isfinite(c)]
    if c.size == 0:
        return None
    u = np.unique(c)
    if u.size < 3:
        return None
    step = float(np.min(np.diff(u)))
    k = (u - u[0]) / step
    if step <= 0 or not np.allclose(k, np.round(k), atol=1e-3):
        return None
    return float(u[0]), step, round(float(k.max())) + 1


def _sites_as_grid(f, dim: str, hname: str, vname: str):
    """``(dataset, truth)`` of sites on a regular lattice as a (y, x) grid (NaN off-node), or None."""
    ds, da = f.ds, f.value
    if da.dims != (dim,):
        return None
    h = np.asarray(ds[hname].values, dtype=float)
    v = np.asarray(ds[vname].values, dtype=float)
    ah, av = _lattice_axis(h), _lattice_axis(v)
    if ah is None or av is None or ah[2] * av[2] > 4 * h.size or not np.isfinite(h + v).all():
        return None
    ih = np.rint((h - ah[0]) / ah[1]).astype(int)
    iv = np.rint((v - av[0]) / av[1]).astype(int)
    if len(set(zip(ih.tolist(), iv.tolist()))) < h.size:  # two sites in one cell
        return None
    hc = ah[0] + ah[1] * np.arange(ah[2])
    vc = av[0] + av[1] * np.arange(av[2])

    def grid(a: xr.DataArray | None, fill: float) -> xr.DataArray | None:
        if a is None:
            return None
        values = np.asarray(a.values)
        out = np.full((vc.size, hc.size), fill, dtype=np.result_type(values.dtype, type(fill)))
        out[iv, ih] = values
        return xr.DataArray(out, dims=(vname, hname), attrs=dict(a.attrs))

    coords = {vname: (vname, vc, dict(ds[vname].attrs)), hname: (hname, hc, dict(ds[hname].attrs))}
    data = {f.var: grid(da, np.nan)}
    if f.std is not None:
        data[f.std.name] = grid(f.std, np.nan)
    if f.flag is not None:
        fill = f.flag.encoding.get("_FillValue")
        fill = -127 if fill is None else fill  # (the no-value flag; a fill value in older files)
        data[f.flag.name] = grid(f.flag, fill).astype(f.flag.dtype)
    out = xr.Dataset(data, coords=coords, attrs=dict(ds.attrs))
    truth = grid(f.truth, np.nan)
    return out, (truth.assign_coords(out.coords) if truth is not None else None)


def _lattice_of(f, coords: str):
    """``(grid Dataset, grid truth, coords)`` for sites on a regular lattice, else None."""
    if _find_sites(f.ds, f.value, coords) is None:
        return None
    for pick in ("auto", "xy") if coords == "auto" else (coords,):
        found = _find_sites(f.ds, f.value, pick)
        as_grid = _sites_as_grid(f, *found[:3]) if found is not None else None
        if as_grid is not None:
            return as_grid[0], as_grid[1], pick
    return None


def _empty_slice_message(da: xr.DataArray, var: str, g: _MapGeometry) -> str:
    """Why a slice of a field that has values elsewhere cannot be drawn, and where to look."""
    other = [d for d in da.dims if d not in g.spatial]
    finite = np.isfinite(da.transpose(*other, *g.spatial).values)
    first = np.argwhere(finite.reshape(finite.shape[: len(other)] + (-1,)).any(axis=-1))[0]
    hint = ", ".join(f"{d!r}: {int(i)}" for d, i in zip(other, first, strict=True))
    return (f"{var!r} has no value in the slice drawn ({', '.join(g.notes)}); "
            f"the first slice with values is isel={{{hint}}}")


def _spatial_dims(ds: xr.Dataset, da: xr.DataArray, var: str, coords: str, sites) -> tuple[str, ...]:
    """The horizontal dims: the site dim, (lat, lon) or (y, x)."""
    if sites is not None:
        return (sites[0],)
    found = {
        role: [d for d in da.dims if test(str(d), _coord(da, str(d)))]
        for role, test in (("lon", _is_lon), ("lat", _is_lat), ("x", _is_x), ("y", _is_y))
    }
    if found["lon"] and found["lat"] and coords != "xy":
        return (str(found["lat"][0]), str(found["lon"][0]))
    if found["x"] and found["y"]:
        return (str(found["y"][0]), str(found["x"][0]))
    if da.ndim == 2:
        return tuple(str(d) for d in da.dims)
    raise ValueError(
        f"cannot tell the horizontal dims of {var!r} {da.dims}: expected lon/lat or "
        "x/y dims, or a site dim with x/y or lon/lat coordinate variables"
    )


def _other_dims(
    da: xr.DataArray, spatial: tuple[str, ...], isel: Mapping[str, int] | None
) -> tuple[dict[str, int], list[str]]:
    """The index of every non-spatial dim and the notes that say which slice is shown."""
    others = [str(d) for d in da.dims if d not in spatial]
    unknown = [str(k) for k in (isel or {}) if str(k) not in others]
    if unknown:
        drawn = [u for u in unknown if u in spatial]
        raise ValueError(
            f"isel: {', '.join(map(repr, unknown))} "
            + ("is drawn on the map, not sliced" if drawn == unknown else
               f"is not a dim of {da.name!r} to slice")
            + f"; the dims to slice are {', '.join(map(repr, others)) or 'none'}"
        )
    sel: dict[str, int] = {}
    notes = []
    for d in da.dims:
        if d in spatial:
            continue
        k = int((isel or {}).get(str(d), 0))
        n = da.sizes[d]
        if not -n <= k < n:
            raise IndexError(f"index {k} out of range for {d!r} of size {n}")
        sel[str(d)] = k % n
        c = _coord(da, str(d))
        layer = da.coords.get("layer")
        if layer is not None and layer.dims == (d,) and d != "layer":  # SPE10's layer numbers
            notes.append(f"layer {_fmt_value(layer.values[k % n])}")
        # no coordinate: an index, not a value ("depth = 0" read as a depth of 0)
        notes.append(_coord_note(str(d), c, c.values[k % n]) if c is not None else f"{d} index {k % n}")
    return sel, notes + _scalar_notes(da)


@dataclass
class _MapGeometry:
    """Where the values of a map go; ``hc``, ``vc`` 1-D, or 2-D for a curvilinear grid (longitudes on one arc)."""

    sites: Any
    spatial: tuple[str, ...]
    sel: dict[str, int]
    notes: list[str]
    hc: np.ndarray
    vc: np.ndarray
    hattr: xr.DataArray | None
    vattr: xr.DataArray | None
    is_lonlat: bool
    order: np.ndarray | None
    blank: np.ndarray | None = None  # cells of a curvilinear grid without a position
    corners: Any = None  # (lon, lat) corners of a grid around a pole, taken in a polar plane
    rows_up: bool = True  # a curvilinear grid's y axis grows with its row index (see _rows_up)

    @property
    def hname(self) -> str:
        return self.sites[1] if self.sites is not None else self.spatial[1]

    @property
    def vname(self) -> str:
        return self.sites[2] if self.sites is not None else self.spatial[0]

    def array(self, a: xr.DataArray | None) -> np.ndarray | None:
        """The slice of ``a`` shown, shaped (vertical, horizontal) for grids or (site,)."""
        if a is None:
            return None
        a = a.isel(self.sel, missing_dims="ignore").transpose(*self.spatial)  # a flag of realisations lacks their dim
        if self.order is not None:
            a = a.isel({self.spatial[1]: self.order})
        return a.values


def _rows_up(ds: xr.Dataset, row_dim: str) -> bool:
    """Whether a curvilinear grid's y grows with its row index: False only for a falling 1-D row coordinate."""
    coord = ds.coords.get(row_dim)
    if coord is None or coord.ndim != 1 or coord.size < 2 or not np.issubdtype(coord.dtype, np.number):
        return True
    return bool(coord.values[-1] >= coord.values[0])


def _map_geometry(
    ds: xr.Dataset, da: xr.DataArray, var: str, coords: str, isel: Mapping[str, int] | None,
    curvilinear: _Curvilinear | None,
) -> _MapGeometry:
    mesh = curvilinear.mesh if curvilinear is not None else None
    if mesh is not None:  # cells drawn on their 2-D corners
        spatial = tuple(str(d) for d in curvilinear.lon.dims)
        sel, notes = _other_dims(da, spatial, isel)
        blank = mesh[2] if mesh[2].any() else None
        return _MapGeometry(None, spatial, sel, notes, *mesh[:2], curvilinear.lon, curvilinear.lat, True, None,
                            blank, mesh[3], _rows_up(ds, spatial[0]))
    sites = _find_sites(ds, da, coords)
    spatial = _spatial_dims(ds, da, var, coords, sites)
    sel, notes = _other_dims(da, spatial, isel)
    if sites is not None:
        _, hname, vname, is_lonlat = sites
        hc = np.asarray(ds[hname].values, dtype=float)
        vc = np.asarray(ds[vname].values, dtype=float)
        hattr, vattr = ds[hname], ds[vname]
    else:
        is_lonlat = _is_lon(spatial[1], _coord(da, spatial[1])) and _is_lat(
            spatial[0], _coord(da, spatial[0])
        )
        if not (is_lonlat or _is_x(spatial[1], _coord(da, spatial[1]))):
            hdim, vdim = _orient(da.isel(sel).transpose(*spatial))
            spatial = (vdim, hdim)
        hc, vc = _centres(da, spatial[1]), _centres(da, spatial[0])
        hattr, vattr = _coord(da, spatial[1]), _coord(da, spatial[0])
    order = None
    if is_lonlat:
        hc = _contiguous_lon(hc)
        if sites is None and hc.size > 1 and not (
            np.all(np.diff(hc) > 0) or np.all(np.diff(hc) < 0)
        ):
            order = np.argsort(hc, kind="stable")
            hc = hc[order]
    return _MapGeometry(sites, spatial, sel, notes, hc, vc, hattr, vattr, is_lonlat, order)


@dataclass
class _MapPanels:
    """The masked arrays of every panel and the status of every cell or site."""

    panels: dict[str, np.ma.MaskedArray]
    value_keys: list[str]
    unc_keys: list[str]
    obs: np.ndarray
    imp: np.ndarray
    inside: np.ndarray
    predicted_only: bool

    @property
    def keys(self) -> list[str]:
        return self.value_keys + self.unc_keys


def _map_panels(f: _Field, g: _MapGeometry, std: bool) -> _MapPanels:
    value = np.asarray(g.array(f.value), dtype=float)
    flag, sdev, tru = g.array(f.flag), g.array(f.std), g.array(f.truth)
    value_keys = ["imputed"] + (["truth"] if tru is not None else [])
    unc_keys = (["std"] if std and sdev is not None else []) + (["error"] if tru is not None else [])
    obs, imp, inside = _status(value, sdev, flag)
    if g.blank is not None:  # placeholder cells: left blank (white), in every panel
        obs, imp, inside = obs & ~g.blank, imp & ~g.blank, inside & ~g.blank
        value = np.where(g.blank, np.nan, value)
        tru = None if tru is None else np.where(g.blank, np.nan, np.asarray(tru, dtype=float))
    # without a flag, only a positive std tells the imputed (predicted) cells apart
    unknown = flag is None and sdev is None
    predicted_only = flag is None and bool(imp.any()) and not obs.any()
    panels: dict[str, np.ma.MaskedArray] = {"imputed": np.ma.masked_invalid(value)}
    if not panels["imputed"].count():
        raise ValueError(_empty_slice_message(f.value, f.var, g))
    if tru is not None:
        panels["truth"] = np.ma.masked_invalid(np.asarray(tru, dtype=float))
    if "std" in unc_keys:
        panels["std"] = np.ma.masked_where(~imp, np.ma.masked_invalid(np.asarray(sdev, float)))
    if "error" in unc_keys:
        err = np.ma.abs(panels["imputed"] - panels["truth"])
        panels["error"] = err if unknown else np.ma.masked_where(~imp, err)
    return _MapPanels(panels, value_keys, unc_keys, obs, imp, inside, predicted_only)
