"""Maps of a field on a grid or at scattered sites, in lon/lat (cartopy) or plain x/y."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .cartography import _add_map_features, _contiguous_lon, _import_cartopy
from .conventions import (
    _LAT_NAMES,
    _LON_NAMES,
    _X_NAMES,
    _Y_NAMES,
    PANEL_TITLES,
    _centres,
    _choose_label,
    _coord,
    _Field,
    _is_lat,
    _is_lon,
    _is_x,
    _is_y,
    _Metrics,
    _orient,
    _status,
    _tick_chars,
    _uncertainty_label,
)
from .curvilinear import _Curvilinear, _curvilinear
from .polar import (
    beside_pole,
    enclosed_pole,
    polar_cap,
    polar_centre,
    polar_extent,
    polar_projection,
)
from .profiles import _as_profile, profile
from .style import (
    UNCERTAINTY_CMAP,
    VALUE_CMAP,
    _cmap,
    _colourbar,
    _coord_note,
    _corners,
    _draw_domain,
    _edges,
    _fmt_value,
    _outline,
    _panel_norms,
    _plt,
    _scalar_notes,
    _units_suffix,
    is_log_variable,
    label_for,
    wrap_label,
)

__all__ = ["field_map"]


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
    """``(ds, truth, coords)`` to draw instead, or None: a curvilinear grid (2-D lon/lat)
    that cannot be drawn as cells as points at its cells' centres (those that have one);
    sites on a regular lattice (with ``raster``) as a grid."""
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
    """Sites on a regular lattice (e.g. the nodes of a prediction grid) as a (y, x) grid.

    Returns ``(dataset, truth)`` with the variable, its std and flag on the lattice (NaN,
    or the flag's fill value, where there is no node), or None when the sites are not on a
    lattice that they fill well enough for a raster.
    """
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
        fill = f.flag.encoding.get("_FillValue", -127)
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


_MAP_OPTIONS = ("std", "projection", "coords", "isel", "log", "cmap", "std_cmap", "percentiles",
                "coastlines", "borders", "outline_holes", "marker_size", "panel_width", "figsize")


def field_map(
    ds: xr.Dataset,
    var: str,
    truth: xr.DataArray | xr.Dataset | None = None,
    *,
    std: bool = True,
    projection: Any = None,
    coords: str = "auto",
    isel: Mapping[str, int] | None = None,
    log: bool | None = None,
    cmap: Any = None,
    std_cmap: Any = UNCERTAINTY_CMAP,
    percentiles: tuple[float, float] = (1.0, 99.0),
    coastlines: bool = True,
    borders: bool = True,
    outline_holes: bool = True,
    marker_size: float | None = None,
    panel_width: float = 3.3,
    figsize: tuple[float, float] | None = None,
    raster: bool = True,
) -> Figure:
    """Maps of an imputed field, its std, and with ``truth`` the truth and the error.

    Panels, left to right: the field, the truth when given, the predictive std when
    ``std`` is set, and ``|field - truth|`` when the truth is given. The std and error
    panels show the imputed cells or sites only, because both are 0 at observed ones. The
    value panels share one norm and one colourbar, and so do the std and error panels.

    Without a ``v_imputed`` flag, as in the output of ``GPVAEImputer.predict`` at new
    locations (``v`` and ``v_std`` only), a cell or site with a positive std counts as
    imputed (predicted) and one with a std of 0 as observed, as :func:`geogpvae.impute`
    writes them. Predictions alone fill the std panel, and the field panel is titled
    "predicted field".

    - Gridded data (1-D dim coords) are drawn with ``pcolormesh`` on cell edges. Thin
      black lines along the cell edges outline the imputed cells when ``outline_holes``
      is set. Cells without a value are grey, and cells outside the domain are white.
    - Scattered data (one dim such as ``site``, with coordinate variables ``x``/``y`` or
      ``lon``/``lat`` along it) are drawn as points coloured by value. Observed sites
      are circles with a thin edge, imputed ones triangles with a black edge, and sites
      outside the domain small grey crosses. A legend tells them apart.
    - lon/lat data go on a cartopy GeoAxes, with gridlines and with coastlines and
      borders when Natural Earth shapefiles are on disk (see :func:`find_map_shapefile`).
      Nothing is ever downloaded. Without them, or without cartopy, the map is drawn all
      the same and a single warning per process says so.
    - Projected x/y data go on plain axes, with an equal aspect when the units agree.
    - Curvilinear grids (longitude and latitude both 2-D on the variable's dims, as ocean
      and regional climate models write them) are drawn as cells on a map, with corners
      midway between neighbouring centres, in one piece across the dateline. Grids around a
      pole (sea ice) are drawn as cells too, their corners taken in a polar plane. Global ones
      (a seam, or the fold of a tripolar grid) and ones with NaN centres are drawn as points
      at the cells' centres, like scattered data. Placeholder cells, with longitude and
      latitude both exactly 0 far from the rest of the grid (NEMO writes them for the land
      processor domains it eliminates), have no position: they are left blank, or out of
      the points, and a warning says so once.
    - A field with one dim and no sites (a transect, a time series, a well log) has no map:
      it is drawn by :func:`~geogpvae.plot.profile` instead (with ``truth``, ``log`` and
      ``figsize``; the map options do not apply).

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
        Name of the imputed variable.
    truth : xarray.DataArray or xarray.Dataset, optional
        The complete field on the same grid or sites, or a Dataset that holds ``var``.
    std : bool
        Add the predictive standard deviation panel.
    projection : cartopy CRS or str, optional
        Map projection for lon/lat data. A string names one that is centred on the data:
        ``"PlateCarree"``, ``"LambertAzimuthalEqualArea"``, ``"Mercator"`` or
        ``"Robinson"``. By default a grid spanning 300 degrees of longitude or more is
        global and gets PlateCarree, with its central longitude midway between the grid's
        outer cell edges, so that no cell straddles the seam of the map (0..360 grids and
        grids across 180 come out whole), unless it stays poleward of 40 degrees (a
        sea-ice grid), or is a curvilinear grid that encloses a pole and lies wholly in its
        hemisphere, poleward of 10 degrees (NSIDC's hemispheric sea-ice grids,
        :func:`~geogpvae.plot.polar.enclosed_pole`): that polar cap gets a polar stereographic map, framed by the box
        around its cells (:func:`~geogpvae.plot.polar.polar_extent`), its central longitude
        turned to a curvilinear grid's own rows and columns, its y axis up (the row
        dimension's 1-D coordinate, where it has one, says which way y grows; else the
        first row is the bottom one) (:func:`~geogpvae.plot.polar.polar_centre`). Data spanning less
        than 60 degrees get a Lambert azimuthal equal-area projection centred on them, and
        anything else gets PlateCarree centred on the data.
    coords : {"auto", "lonlat", "xy"}
        Which coordinates to use for scattered data that have both. ``"auto"`` prefers
        lon/lat.
    isel : mapping of str to int, optional
        Index of the other dims (e.g. ``{"time": 3}``). The default is the first index of
        each. On sites with one more dim (``(time, station)``, ``(well, depth)``), an index
        of the site dim with it picks one site, drawn as a :func:`~geogpvae.plot.profile`.
    log : bool, optional
        Log colour norm; by default that of the variable's ``geogpvae_transform``.
    cmap, std_cmap : str or Colormap, optional
        Colour maps for the values and for std and error.
    percentiles : tuple of float
        Robust colour limits, in percent.
    coastlines, borders : bool
        Draw these when the shapefiles are found on disk.
    outline_holes : bool
        Outline the imputed cells of gridded data on the field panel.
    marker_size : float, optional
        Marker area for scattered data, in points squared.
    panel_width : float
        Width of one panel, in inches.
    figsize : tuple of float, optional
        Figure size, overriding the one computed from ``panel_width``. By default, maps
        with a fixed aspect (equal units on both axes, lon/lat) get the height that the
        aspect asks for, with room for the titles and the colourbars.
    raster : bool
        Draw sites that lie on a regular lattice (evenly spaced x and y that they fill at
        least a quarter of, one site per node), such as the nodes of a prediction grid, as
        a raster of cells instead of one marker per site. Nodes missing from the lattice
        are left white.

    Returns
    -------
    matplotlib.figure.Figure
        The figure. The panels have gids ``"imputed"``, ``"truth"``, ``"std"`` and
        ``"error"``. Scatter collections have the gids ``"observed"``, ``"imputed"`` and
        ``"outside"``, or ``"context"`` for the grey observed sites on the std and error
        panels.
    """
    if coords not in ("auto", "lonlat", "xy"):
        raise ValueError("coords must be 'auto', 'lonlat' or 'xy'")
    f = _Field(ds, var, truth)
    drawn = _profile_instead(ds, var, truth, f, coords, isel, log, figsize)
    if drawn is not None:
        return drawn
    curvilinear = _curvilinear(ds, var, coords)  # its placeholder cells searched once a map
    redrawn = _redrawn_as(ds, curvilinear, truth, f, coords, raster)
    if redrawn is not None:  # curvilinear cells as points; sites on a lattice as a raster
        kwargs = {k: v for k, v in locals().items() if k in _MAP_OPTIONS}
        return field_map(redrawn[0], var, redrawn[1], **{**kwargs, "coords": redrawn[2], "raster": False})
    use_log = is_log_variable(f.value) if log is None else bool(log)
    g = _map_geometry(ds, f.value, var, coords, isel, curvilinear)
    p = _map_panels(f, g, std)
    style = _PanelStyle.choose(p, percentiles, use_log, cmap, std_cmap, marker_size)
    view = _MapView.choose(g, projection)
    size = _map_size(g, view, len(p.value_keys), len(p.unc_keys), panel_width, figsize)
    subplot_kw = {"projection": view.proj} if view.proj is not None else {}
    fig, (axes,) = _plt().subplots(1, len(p.keys), figsize=size.figsize, squeeze=False,  # one row
                                   subplot_kw=subplot_kw,
                                   layout="compressed" if size.fixed else "constrained")
    mappables = {}
    for ax, key in zip(axes, p.keys, strict=True):
        mappables[key] = _draw_map_panel(ax, key, g, p, style, view, outline_holes)
        _frame_map_panel(ax, g, view, first=ax is axes[0], coastlines=coastlines, borders=borders,
                         same_units=size.same_units)
    if g.sites is not None:
        _site_legend(axes[0], p.obs, p.imp, p.inside)
    h = _fit_projected_height(fig, axes[0], size) if size.auto and view.ccrs is not None else size.h
    # the pad is measured from the panels' frame: it must clear their tick and axis labels
    _map_colourbars(fig, axes, mappables, p, f, var, pad=(size.cbar_pad + size.under) / h,
                    size=size)
    fig.suptitle(f.name + (" (" + ", ".join(g.notes) + ")" if g.notes else ""))
    for ax in axes:
        # a panel that its aspect makes shorter than its box stays under its title, where
        # the layout left room for it (the colourbars below anchor it at the bottom)
        ax.set_anchor("N")
    if view.ccrs is None and not g.is_lonlat:  # long x labels give way to "x [m]"
        short = g.hname + (_units_suffix(g.hattr.attrs.get("units")) if g.hattr is not None else "")
        for ax in axes:
            _choose_label(ax.xaxis.label, short, size.w + size.gap - 0.1, size.mt)
    return fig


def _empty_slice_message(da: xr.DataArray, var: str, g: _MapGeometry) -> str:
    """Why a slice of a field that has values elsewhere cannot be drawn, and where to look."""
    other = [d for d in da.dims if d not in g.spatial]
    finite = np.isfinite(da.transpose(*other, *g.spatial).values)
    first = np.argwhere(finite.reshape(finite.shape[: len(other)] + (-1,)).any(axis=-1))[0]
    hint = ", ".join(f"{d!r}: {int(i)}" for d, i in zip(other, first, strict=True))
    return (f"{var!r} has no value in the slice drawn ({', '.join(g.notes)}); "
            f"the first slice with values is isel={{{hint}}}")


_MAP_TITLES = {**PANEL_TITLES, "imputed": "imputed field"}


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
    """Where the values of a map go: horizontal/vertical centres, names and the slice shown.

    ``hc`` and ``vc`` are 1-D for grids and sites, 2-D (on ``spatial``) for the cells of a
    curvilinear grid, with longitudes on one arc.
    """

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
        a = a.isel(self.sel).transpose(*self.spatial)
        if self.order is not None:
            a = a.isel({self.spatial[1]: self.order})
        return a.values


def _rows_up(ds: xr.Dataset, row_dim: str) -> bool:
    """Whether a curvilinear grid's y axis grows with its row index: False only where the row
    dimension has a 1-D numeric coordinate that falls (files whose first row is the top one,
    as NSIDC's sea-ice grids are written); True otherwise, as ``pcolormesh`` draws an array."""
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


@dataclass
class _PanelStyle:
    """Norms and colour maps of the value and the uncertainty panels, and the marker size."""

    vnorm: Any
    unorm: Any
    vcmap: Any
    ucmap: Any
    marker_size: float

    @classmethod
    def choose(cls, p: _MapPanels, percentiles, use_log: bool, cmap, std_cmap, marker_size):
        vnorm, unorm = _panel_norms([p.panels[k] for k in p.value_keys],
                                    [p.panels[k] for k in p.unc_keys], percentiles, use_log)
        size = marker_size or float(np.clip(4000.0 / max(p.panels["imputed"].size, 1), 10.0, 60.0))
        return cls(vnorm, unorm, _cmap(cmap or VALUE_CMAP), _cmap(std_cmap), size)


@dataclass
class _MapView:
    """The extent of the map (cell edges for grids) and, for lon/lat, its projection."""

    hedges: np.ndarray | None
    vedges: np.ndarray | None
    h0: float
    h1: float
    v0: float
    v1: float
    ccrs: Any = None
    proj: Any = None
    data_crs: Any = None
    is_global: bool = False
    centre: float = 0.0
    cap: str | None = None  # "north" or "south": a polar cap, on a polar stereographic map
    box: list[float] | None = None  # the extent of a polar map, in its projection's units

    @property
    def span(self) -> float:
        return self.h1 - self.h0

    @property
    def middle(self) -> float:
        return 0.5 * (self.h0 + self.h1)

    @classmethod
    def choose(cls, g: _MapGeometry, projection: Any) -> _MapView:
        hedges = vedges = None
        if g.sites is None:  # the edges of a grid, or the corners of a curvilinear one
            edges = _corners if g.hc.ndim == 2 else _edges
            hedges, vedges = g.corners if g.corners is not None else (edges(g.hc), edges(g.vc))
            if g.is_lonlat:
                vedges = np.clip(vedges, -90.0, 90.0)
            h0, h1 = float(np.min(hedges)), float(np.max(hedges))
            v0, v1 = float(np.min(vedges)), float(np.max(vedges))
        else:
            hfin, vfin = g.hc[np.isfinite(g.hc)], g.vc[np.isfinite(g.vc)]
            h0, h1 = float(np.min(hfin)), float(np.max(hfin))
            v0, v1 = float(np.min(vfin)), float(np.max(vfin))
            pad_h, pad_v = 0.05 * (h1 - h0 or 1.0), 0.05 * (v1 - v0 or 1.0)
            h0, h1, v0, v1 = h0 - pad_h, h1 + pad_h, v0 - pad_v, v1 + pad_v
            if g.is_lonlat:
                v0, v1 = max(v0, -90.0), min(v1, 90.0)
        view = cls(hedges, vedges, h0, h1, v0, v1)
        view.ccrs = _import_cartopy() if g.is_lonlat else None
        if view.ccrs is not None:
            view.centre = float(np.mod(view.middle + 180.0, 360.0) - 180.0)
            view.is_global = view.span >= 300
            view.proj = _projection(view.ccrs, projection, view.centre, float(0.5 * (v0 + v1)),
                                    view.span, view.is_global)
            view.data_crs = view.ccrs.PlateCarree()
            beside = beside_pole(v0, v1) if np.ndim(hedges) != 1 else None  # (a regular grid keeps its rectangle)
            view.cap = (polar_cap(view.span, v0, v1) or enclosed_pole(hedges, vedges) or beside) if projection is None else None
            if view.cap is not None:  # a curvilinear grid's map follows the grid's own orientation
                view.centre = polar_centre(view.ccrs, view.cap, view.centre, hedges, vedges, rows_up=g.rows_up)
                view.proj = polar_projection(view.ccrs, view.cap, view.centre)
                view.box = _polar_box(g, view)
        return view


def _polar_box(g: _MapGeometry, view: _MapView) -> list[float]:
    """The extent of a polar map: the box around the grid's cells, or its sites with a margin."""
    if g.sites is not None:
        return polar_extent(view.ccrs, view.proj, g.hc, g.vc, pad=0.05)
    if view.hedges.ndim == 1:  # a regular grid's edges
        return polar_extent(view.ccrs, view.proj, view.hedges[None, :], view.vedges[:, None])
    return polar_extent(view.ccrs, view.proj, view.hedges, view.vedges)


@dataclass
class _MapSize:
    """Figure size and the panel size, estimated from the text around the panels."""

    figsize: tuple[float, float]
    width: float
    w: float
    h: float
    gap: float
    top: float
    below: float
    fixed: bool
    same_units: bool
    auto: bool
    mt: Any
    cbar_pad: float = 0.1  # inches
    under: float = 0.0  # inches of tick and axis labels under a panel


def _map_ratio(g: _MapGeometry, view: _MapView) -> tuple[float, bool, bool]:
    """Height over width of a panel, whether it is fixed, whether both axes share units."""
    same_units = False
    if g.is_lonlat:
        ratio = (view.v1 - view.v0) / max(view.span, 1e-9)
        if view.ccrs is None or not view.is_global:
            floor = 0.05 if view.ccrs is None else 0.2
            ratio /= max(math.cos(math.radians(0.5 * (view.v0 + view.v1))), floor)
    else:
        same_units = (
            g.hattr is not None and g.vattr is not None
            and g.hattr.attrs.get("units") == g.vattr.attrs.get("units")
        )
        ratio = (view.v1 - view.v0) / max(view.span, 1e-12) if same_units else 0.8
    # panels with a fixed aspect get the figure height that their aspect asks for
    fixed = g.is_lonlat or same_units
    return (float(np.clip(ratio, 0.25, 2.5)) if fixed else 0.8), fixed, same_units


def _map_size(g: _MapGeometry, view: _MapView, nv: int, nu: int, panel_width: float,
              figsize: tuple[float, float] | None) -> _MapSize:
    ratio, fixed, same_units = _map_ratio(g, view)
    ncols = nv + nu
    mt = _Metrics()
    if view.ccrs is not None:  # grid line labels in small type, left of and under panel 1 only
        left = mt.w_pad + mt.tick + mt.digits(5, mt.small)
        gap = 2 * mt.w_pad
        under = mt.x_ticks(mt.small)
    else:  # tick labels on every panel, axis labels under all and left of the first
        ychars = _tick_chars(view.v0, view.v1)
        left = mt.w_pad + mt.lines(mt.label_font) + mt.label_pad + mt.tick + mt.digits(ychars)
        gap = 2 * mt.w_pad + mt.tick + mt.digits(ychars)
        under = mt.x_ticks() + mt.x_label()
    width = panel_width * ncols + 0.6 if figsize is None else float(figsize[0])
    w = max((width - left - mt.w_pad - 0.03 - (ncols - 1) * gap) / ncols, 0.3)
    top = mt.h_pad + mt.lines(mt.big) + mt.title(1)  # suptitle and panel titles
    cbar_pad = 0.1
    below = (mt.h_pad + under + cbar_pad + mt.x_ticks() + mt.x_label()
             + 0.85 * (max(nv, nu) * w + (max(nv, nu) - 1) * gap) / 30.0)
    auto = figsize is None
    if figsize is None:
        h = w * ratio
        figsize = (width, top + h + below)
    else:
        h = max(float(figsize[1]) - top - below, 0.3)
        if fixed:
            w, h = min(w, h / ratio), min(h, w * ratio)
    return _MapSize(figsize, width, w, h, gap, top, below, fixed, same_units, auto, mt, cbar_pad,
                    under)


def _draw_map_panel(ax, key: str, g: _MapGeometry, p: _MapPanels, style: _PanelStyle,
                    view: _MapView, outline_holes: bool) -> Any:
    """Draw one panel's data; return the artist that carries its colours."""
    is_value = key in p.value_keys
    norm, cm = (style.vnorm, style.vcmap) if is_value else (style.unorm, style.ucmap)
    tkw = {"transform": view.data_crs} if view.data_crs is not None else {}
    ax.set_gid(key)
    title = "predicted field" if key == "imputed" and p.predicted_only else _MAP_TITLES[key]
    ax.set_title(title, fontsize="medium")
    if g.sites is not None:
        return _draw_sites(ax, key, g.hc, g.vc, p.panels[key], p.obs, p.imp, p.inside, cm, norm,
                           style.marker_size, tkw)
    m = ax.pcolormesh(view.hedges, view.vedges, p.panels[key], cmap=cm, norm=norm,
                      shading="flat", rasterized=True, **tkw)
    m.set_gid(key)
    _draw_domain(ax, view.hedges, view.vedges, p.inside, **tkw)
    if key == "imputed" and outline_holes and p.imp.any() and p.obs.any():
        _outline(ax, view.hedges, view.vedges, p.imp, **tkw)
    return m


def _frame_map_panel(ax, g: _MapGeometry, view: _MapView, *, first: bool, coastlines: bool,
                     borders: bool, same_units: bool) -> None:
    """Extent, gridlines or axis labels, and map features of one panel."""
    if view.ccrs is not None:
        if view.cap is not None:
            ax.set_extent(view.box, crs=view.proj)
        elif view.is_global:
            ax.set_global()
        else:
            ax.set_extent([view.h0 - view.middle, view.h1 - view.middle, view.v0, view.v1],
                          crs=view.ccrs.PlateCarree(central_longitude=view.centre))
        # labels on the first panel only: the others show the same map, and
        # cartopy's label placement is the slowest part of drawing a map
        # around a pole, labels on the frame: cartopy's default puts the latitudes on the data
        inline = {"x_inline": False, "y_inline": False, "rotate_labels": False} if view.cap is not None else {}
        gl = ax.gridlines(draw_labels=first, linewidth=0.3, color="0.4", alpha=0.7, **inline)
        if first:
            gl.top_labels = gl.right_labels = False
            gl.xlabel_style = gl.ylabel_style = {"size": "small"}
        _add_map_features(ax, view.ccrs, view.span, coastlines, borders)
        return
    ax.set_xlim(view.h0, view.h1)
    ax.set_ylim(view.v0, view.v1)
    if g.is_lonlat:
        ax.set_aspect(1.0 / max(math.cos(math.radians(0.5 * (view.v0 + view.v1))), 0.05))
        ax.set_xlabel("longitude [\u00b0E]")
        if first:
            ax.set_ylabel("latitude [\u00b0N]")
        return
    if same_units:
        ax.set_aspect("equal")
    ax.set_xlabel(label_for(g.hattr, g.hname) if g.hattr is not None else g.hname)
    if first:  # the other panels show the same map
        ax.set_ylabel(label_for(g.vattr, g.vname) if g.vattr is not None else g.vname)


def _fit_projected_height(fig, ax, size: _MapSize) -> float:
    """Resize the figure to the projected extent's shape; the panel height in inches."""
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    h = size.w * float(np.clip(abs(y1 - y0) / max(abs(x1 - x0), 1e-12), 0.25, 2.5))
    fig.set_size_inches(size.width, size.top + h + size.below)
    return h


def _map_colourbars(fig, axes, mappables, p: _MapPanels, f: _Field, var: str, pad: float,
                    size: _MapSize) -> None:
    kw = {"location": "bottom", "shrink": 0.85, "aspect": 30, "pad": pad}

    def bar_label(text: str, n_panels: int) -> str:
        # wrapped to the colourbar's width, so that two bars side by side keep their
        # labels apart
        inches = kw["shrink"] * (n_panels * size.w + (n_panels - 1) * size.gap)
        return wrap_label(text, max(12, int(inches / (0.55 * size.mt.label_font))))

    value_axes = [a for a, k in zip(axes, p.keys, strict=True) if k in p.value_keys]
    _colourbar(fig, mappables[p.value_keys[0]], value_axes,
               bar_label(label_for(f.value, var), len(p.value_keys)), "colorbar:value", **kw)
    if p.unc_keys:
        unc_axes = [a for a, k in zip(axes, p.keys, strict=True) if k in p.unc_keys]
        _colourbar(fig, mappables[p.unc_keys[0]], unc_axes,
                   bar_label(_uncertainty_label(f, p.unc_keys), len(p.unc_keys)),
                   "colorbar:uncertainty", **kw)


def _projection(ccrs, projection, centre: float, clat: float, span: float, is_global: bool):
    if projection is not None and not isinstance(projection, str):
        return projection
    name = (projection or "").lower()
    if not name:
        if is_global:
            name = "platecarree"
        elif span < 60:
            name = "lambertazimuthalequalarea"
        else:
            name = "platecarree"
    if name == "platecarree":
        return ccrs.PlateCarree(central_longitude=centre)
    if name in ("lambertazimuthalequalarea", "laea"):
        return ccrs.LambertAzimuthalEqualArea(central_longitude=centre, central_latitude=clat)
    if name == "mercator":
        return ccrs.Mercator(central_longitude=centre)
    if name == "robinson":
        return ccrs.Robinson(central_longitude=centre)
    raise ValueError(f"unknown projection {projection!r}")


def _draw_sites(ax, key, hc, vc, data, obs, imp, inside, cmap, norm, size, tkw):
    """Scatter the sites of one panel; return the collection that carries the colours."""
    values = np.ma.filled(data.astype(float), np.nan)
    main = None
    if key in ("imputed", "truth"):
        outside = ~inside
        if outside.any():
            c = ax.scatter(hc[outside], vc[outside], s=size * 0.5, marker="x", c="0.55",
                           linewidths=0.6, zorder=2, **tkw)
            c.set_gid("outside")
        if obs.any():
            c = ax.scatter(hc[obs], vc[obs], c=values[obs], s=size, marker="o", cmap=cmap,
                           norm=norm, edgecolors="0.25", linewidths=0.3, zorder=3, **tkw)
            c.set_gid("observed")
            main = c
        if imp.any():
            c = ax.scatter(hc[imp], vc[imp], c=values[imp], s=size * 1.3, marker="^",
                           cmap=cmap, norm=norm, edgecolors="k", linewidths=0.9, zorder=4,
                           **tkw)
            c.set_gid("imputed")
            main = c if main is None else main
    else:
        if obs.any():
            c = ax.scatter(hc[obs], vc[obs], s=size * 0.25, marker="o", c="0.6",
                           linewidths=0, zorder=2, **tkw)
            c.set_gid("context")
        if imp.any():
            c = ax.scatter(hc[imp], vc[imp], c=values[imp], s=size * 1.3, marker="^",
                           cmap=cmap, norm=norm, edgecolors="k", linewidths=0.9, zorder=4,
                           **tkw)
            c.set_gid("imputed")
            main = c
    if main is None:  # nothing to colour: an empty mappable keeps the colourbar valid
        import matplotlib.cm as mcm

        main = mcm.ScalarMappable(norm=norm, cmap=cmap)
    return main


def _site_legend(ax, obs, imp, inside) -> None:
    handles = [
        Line2D([], [], marker="o", linestyle="", markerfacecolor="0.7",
               markeredgecolor="0.25", markeredgewidth=0.3, markersize=6,
               label=f"observed ({int(obs.sum())})"),
        Line2D([], [], marker="^", linestyle="", markerfacecolor="0.7",
               markeredgecolor="k", markeredgewidth=0.9, markersize=7,
               label=f"{'imputed' if obs.any() else 'predicted'} ({int(imp.sum())})"),
    ]
    if (~inside).any():
        handles.append(Line2D([], [], marker="x", linestyle="", color="0.55",
                              label=f"outside domain ({int((~inside).sum())})"))
    ax.legend(handles=handles, loc="best", fontsize="small", framealpha=0.8)


# --------------------------------------------------------------------------------------


def _profile_instead(ds: xr.Dataset, var: str, truth, f, coords: str, isel, log, figsize) -> Figure | None:
    """What :func:`~geogpvae.plot.field_map` draws as a profile: a field with one dim and no sites
    (a transect, series or log), or one site of a field on sites picked by ``isel``; None for a map."""
    if f.value.ndim == 1 and _find_sites(ds, f.value, coords) is None:
        return _as_profile(ds, var, truth, isel, log, figsize)
    if _picks_one_site(ds, f.value, coords, isel):  # one well's log, one station's series
        return _site_profile(ds, var, truth, f, isel, log, figsize)
    return None


def _picks_one_site(ds: xr.Dataset, da: xr.DataArray, coords: str, isel: Mapping[str, int] | None) -> bool:
    """Whether ``isel`` picks one site of a field on sites and one more dim (logs on
    ``(well, depth)``, series on ``(time, station)``), leaving that dim."""
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
