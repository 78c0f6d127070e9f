"""Maps of a field on a grid or at scattered sites, in lon/lat (cartopy) or plain x/y."""

from __future__ import annotations

import math
from collections.abc import Mapping
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
)
from .layers import _uncertainty_label
from .style import (
    UNCERTAINTY_CMAP,
    VALUE_CMAP,
    _cmap,
    _coord_note,
    _draw_domain,
    _edges,
    _fmt_value,
    _outline,
    _plt,
    _scalar_notes,
    _style_colorbar,
    _units_suffix,
    is_log_variable,
    label_for,
    make_norm,
    robust_limits,
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
        grids across 180 come out whole). Data spanning less than 60 degrees get a
        Lambert azimuthal equal-area projection centred on them, and anything else gets
        PlateCarree centred on the data.
    coords : {"auto", "lonlat", "xy"}
        Which coordinates to use for scattered data that have both. ``"auto"`` prefers
        lon/lat.
    isel : mapping of str to int, optional
        Index of the other dims (e.g. ``{"time": 3}``). The default is the first index of
        each.
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

    Returns
    -------
    matplotlib.figure.Figure
        The figure. The panels have gids ``"imputed"``, ``"truth"``, ``"std"`` and
        ``"error"``. Scatter collections have the gids ``"observed"``, ``"imputed"`` and
        ``"outside"``, or ``"context"`` for the grey observed sites on the std and error
        panels.
    """
    plt = _plt()
    if coords not in ("auto", "lonlat", "xy"):
        raise ValueError("coords must be 'auto', 'lonlat' or 'xy'")
    f = _Field(ds, var, truth)
    da = f.value
    use_log = is_log_variable(da) if log is None else bool(log)

    # what kind of geometry, and which dims are not spatial
    sites = _find_sites(ds, da, coords)
    if sites is not None:
        spatial: tuple[str, ...] = (sites[0],)
    else:
        lon_dims = [d for d in da.dims if _is_lon(str(d), _coord(da, str(d)))]
        lat_dims = [d for d in da.dims if _is_lat(str(d), _coord(da, str(d)))]
        x_dims = [d for d in da.dims if _is_x(str(d), _coord(da, str(d)))]
        y_dims = [d for d in da.dims if _is_y(str(d), _coord(da, str(d)))]
        if lon_dims and lat_dims and coords != "xy":
            spatial = (str(lat_dims[0]), str(lon_dims[0]))
        elif x_dims and y_dims:
            spatial = (str(y_dims[0]), str(x_dims[0]))
        elif da.ndim == 2:
            spatial = tuple(str(d) for d in da.dims)
        else:
            raise ValueError(
                f"cannot tell the horizontal dims of {var!r} {da.dims}: expected lon/lat or "
                "x/y dims, or a site dim with x/y or lon/lat coordinate variables"
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
        notes.append(_coord_note(str(d), c, c.values[k % n]) if c is not None else f"{d} = {k % n}")
    notes += _scalar_notes(da)

    def pick(a):
        return None if a is None else a.isel(sel)

    value, sdev, flag, tru = pick(da), pick(f.std), pick(f.flag), pick(f.truth)
    value_keys = ["imputed"] + (["truth"] if tru is not None else [])
    unc_keys = (["std"] if std and sdev is not None else []) + (
        ["error"] if tru is not None else []
    )
    keys = value_keys + unc_keys

    if sites is not None:
        _, hname, vname, is_lonlat = sites
        hc = np.asarray(ds[hname].values, dtype=float)
        vc = np.asarray(ds[vname].values, dtype=float)
        hattr, vattr = ds[hname], ds[vname]
    else:
        is_lonlat = _is_lon(spatial[1], _coord(da, spatial[1])) and _is_lat(
            spatial[0], _coord(da, spatial[0])
        )
        if sites is None and not (
            is_lonlat or _is_x(spatial[1], _coord(da, spatial[1]))
        ):
            hdim, vdim = _orient(value.transpose(*spatial))
            spatial = (vdim, hdim)
        hc = _centres(da, spatial[1])
        vc = _centres(da, spatial[0])
        hattr, vattr = _coord(da, spatial[1]), _coord(da, spatial[0])

    ccrs = _import_cartopy() if is_lonlat else None
    order = None
    if is_lonlat:
        hc_plot = _contiguous_lon(hc)
        if sites is None and hc_plot.size > 1 and not (
            np.all(np.diff(hc_plot) > 0) or np.all(np.diff(hc_plot) < 0)
        ):
            order = np.argsort(hc_plot, kind="stable")
            hc_plot = hc_plot[order]
    else:
        hc_plot = hc

    # values as masked arrays, shaped (vertical, horizontal) for grids or (site,)
    def arr(a):
        if a is None:
            return None
        a = a.transpose(*spatial)
        if order is not None:
            a = a.isel({spatial[1]: order})
        return a.values

    v_arr = np.asarray(arr(value), dtype=float)
    flag_arr = arr(flag)
    std_arr = arr(sdev)
    obs, imp, inside = _status(v_arr, std_arr, flag_arr)
    # without a flag, only a positive std tells the imputed (predicted) cells apart
    unknown = flag_arr is None and std_arr is None
    predicted_only = flag_arr is None and bool(imp.any()) and not obs.any()
    panels: dict[str, np.ma.MaskedArray] = {"imputed": np.ma.masked_invalid(v_arr)}
    if tru is not None:
        panels["truth"] = np.ma.masked_invalid(np.asarray(arr(tru), dtype=float))
    if "std" in unc_keys:
        panels["std"] = np.ma.masked_where(~imp, np.ma.masked_invalid(np.asarray(std_arr, float)))
    if "error" in unc_keys:
        err = np.ma.abs(panels["imputed"] - panels["truth"])
        panels["error"] = err if unknown else np.ma.masked_where(~imp, err)

    vnorm = make_norm(
        *robust_limits(*[panels[k] for k in value_keys], percentiles=percentiles, log=use_log),
        log=use_log,
    )
    unorm = None
    if unc_keys:
        lo, hi = robust_limits(*[panels[k] for k in unc_keys], percentiles=percentiles, log=use_log)
        unorm = make_norm(lo if use_log else 0.0, hi, log=use_log)
    vcmap, ucmap = _cmap(cmap or VALUE_CMAP), _cmap(std_cmap)

    # extent and projection
    hfin, vfin = hc_plot[np.isfinite(hc_plot)], vc[np.isfinite(vc)]
    if sites is None:
        hedges, vedges = _edges(hc_plot), _edges(vc)
        if is_lonlat:
            vedges = np.clip(vedges, -90.0, 90.0)
        h0, h1 = float(np.min(hedges)), float(np.max(hedges))
        v0, v1 = float(np.min(vedges)), float(np.max(vedges))
    else:
        h0, h1 = float(np.min(hfin)), float(np.max(hfin))
        v0, v1 = float(np.min(vfin)), float(np.max(vfin))
        pad_h = 0.05 * (h1 - h0 or 1.0)
        pad_v = 0.05 * (v1 - v0 or 1.0)
        h0, h1, v0, v1 = h0 - pad_h, h1 + pad_h, v0 - pad_v, v1 + pad_v
        if is_lonlat:
            v0, v1 = max(v0, -90.0), min(v1, 90.0)
    span = h1 - h0
    proj = data_crs = None
    is_global = False
    if ccrs is not None:
        middle = 0.5 * (h0 + h1)
        centre = float(np.mod(middle + 180.0, 360.0) - 180.0)
        clat = float(0.5 * (v0 + v1))
        is_global = span >= 300
        proj = _projection(ccrs, projection, centre, clat, span, is_global)
        data_crs = ccrs.PlateCarree()

    # figure
    ncols = len(keys)
    same_units = False
    if is_lonlat:
        ratio = (v1 - v0) / max(span, 1e-9)
        if ccrs is None or not is_global:
            ratio /= max(math.cos(math.radians(0.5 * (v0 + v1))), 0.05 if ccrs is None else 0.2)
    else:
        same_units = (
            hattr is not None and vattr is not None
            and hattr.attrs.get("units") == vattr.attrs.get("units")
        )
        ratio = (v1 - v0) / max(span, 1e-12) if same_units else 0.8
    # panels with a fixed aspect get the figure height that their aspect asks for
    fixed = is_lonlat or same_units
    ratio = float(np.clip(ratio, 0.25, 2.5)) if fixed else 0.8

    # the size of the figure and of its panels, estimated from the text around them
    mt = _Metrics()
    nv, nu = len(value_keys), len(unc_keys)
    if ccrs is not None:  # grid line labels in small type, left of and under panel 1 only
        left = mt.w_pad + mt.tick + mt.digits(5, mt.small)
        gap = 2 * mt.w_pad
        under = mt.x_ticks(mt.small)
    else:  # tick labels on every panel, axis labels under all and left of the first
        ychars = _tick_chars(v0, v1)
        left = mt.w_pad + mt.lines(mt.label_font) + mt.label_pad + mt.tick + mt.digits(ychars)
        gap = 2 * mt.w_pad + mt.tick + mt.digits(ychars)
        under = mt.x_ticks() + mt.x_label()
    width = panel_width * ncols + 0.6 if figsize is None else float(figsize[0])
    w = max((width - left - mt.w_pad - 0.03 - (ncols - 1) * gap) / ncols, 0.3)
    top = mt.h_pad + mt.lines(mt.big) + mt.title(1)  # suptitle and panel titles
    cbar_pad = 0.1  # inches
    below = (mt.h_pad + under + cbar_pad + mt.x_ticks() + mt.x_label()
             + 0.85 * (max(nv, nu) * w + (max(nv, nu) - 1) * gap) / 30.0)
    auto_size = figsize is None
    if figsize is None:
        h = w * ratio
        figsize = (width, top + h + below)
    else:
        h = max(float(figsize[1]) - top - below, 0.3)
        if fixed:
            w, h = min(w, h / ratio), min(h, w * ratio)
    subplot_kw = {"projection": proj} if proj is not None else {}
    fig, axes = plt.subplots(1, ncols, figsize=figsize, squeeze=False, subplot_kw=subplot_kw,
                             layout="compressed" if fixed else "constrained")
    axes = axes[0]
    titles = {
        "imputed": "imputed field",
        "truth": "truth",
        "std": "predictive std",
        "error": "|imputed \u2212 truth|",
    }
    tkw = {"transform": data_crs} if data_crs is not None else {}
    mappables: dict[str, Any] = {}
    size = marker_size or float(np.clip(4000.0 / max(v_arr.size, 1), 10.0, 60.0))
    for ax, key in zip(axes, keys, strict=True):
        is_value = key in value_keys
        norm, cm = (vnorm, vcmap) if is_value else (unorm, ucmap)
        data = panels[key]
        ax.set_gid(key)
        title = "predicted field" if key == "imputed" and predicted_only else titles[key]
        ax.set_title(title, fontsize="medium")
        if sites is None:
            m = ax.pcolormesh(hedges, vedges, data, cmap=cm, norm=norm, shading="flat",
                              rasterized=True, **tkw)
            m.set_gid(key)
            _draw_domain(ax, hedges, vedges, inside, **tkw)
            if key == "imputed" and outline_holes and imp.any() and obs.any():
                _outline(ax, hedges, vedges, imp, **tkw)
        else:
            m = _draw_sites(ax, key, hc_plot, vc, data, obs, imp, inside, cm, norm, size, tkw)
        mappables[key] = m
        if ccrs is not None:
            if is_global:
                ax.set_global()
            else:
                ax.set_extent([h0 - middle, h1 - middle, v0, v1],
                              crs=ccrs.PlateCarree(central_longitude=centre))
            # labels on the first panel only: the others show the same map, and
            # cartopy's label placement is the slowest part of drawing a map
            first = ax is axes[0]
            gl = ax.gridlines(draw_labels=first, linewidth=0.3, color="0.4", alpha=0.7)
            if first:
                gl.top_labels = gl.right_labels = False
                gl.xlabel_style = gl.ylabel_style = {"size": "small"}
            _add_map_features(ax, ccrs, span, coastlines, borders)
        else:
            ax.set_xlim(h0, h1)
            ax.set_ylim(v0, v1)
            if is_lonlat:
                ax.set_aspect(1.0 / max(math.cos(math.radians(0.5 * (v0 + v1))), 0.05))
                ax.set_xlabel("longitude [\u00b0E]")
                if ax is axes[0]:
                    ax.set_ylabel("latitude [\u00b0N]")
            else:
                if same_units:
                    ax.set_aspect("equal")
                hname_ = sites[1] if sites is not None else spatial[1]
                vname_ = sites[2] if sites is not None else spatial[0]
                ax.set_xlabel(label_for(hattr, hname_) if hattr is not None else hname_)
                if ax is axes[0]:  # the other panels show the same map
                    ax.set_ylabel(label_for(vattr, vname_) if vattr is not None else vname_)
    if sites is not None:
        _site_legend(axes[0], obs, imp, inside)
    if auto_size and ccrs is not None:  # the projected extent sets the panels' shape
        x0, x1 = axes[0].get_xlim()
        y0, y1 = axes[0].get_ylim()
        h = w * float(np.clip(abs(y1 - y0) / max(abs(x1 - x0), 1e-12), 0.25, 2.5))
        fig.set_size_inches(width, top + h + below)
    kw = {"location": "bottom", "shrink": 0.85, "aspect": 30, "pad": cbar_pad / h}
    value_axes = [a for a, k in zip(axes, keys, strict=True) if k in value_keys]
    cb = fig.colorbar(mappables[value_keys[0]], ax=value_axes, **kw)
    cb.set_label(label_for(da, var))
    _style_colorbar(cb)
    cb.ax.set_gid("colorbar:value")
    if unc_keys:
        unc_axes = [a for a, k in zip(axes, keys, strict=True) if k in unc_keys]
        cb = fig.colorbar(mappables[unc_keys[0]], ax=unc_axes, **kw)
        cb.set_label(_uncertainty_label(f, unc_keys))
        _style_colorbar(cb)
        cb.ax.set_gid("colorbar:uncertainty")
    title = str(da.attrs.get("long_name") or var)
    if notes:
        title += " (" + ", ".join(notes) + ")"
    fig.suptitle(title)
    for ax in axes:
        # a panel that its aspect makes shorter than its box stays under its title, where
        # the layout left room for it (the colourbars below anchor it at the bottom)
        ax.set_anchor("N")
    if ccrs is None and not is_lonlat:  # long x labels give way to "x [m]"
        hname_ = sites[1] if sites is not None else spatial[1]
        short = hname_ + (_units_suffix(hattr.attrs.get("units")) if hattr is not None else "")
        for ax in axes:
            _choose_label(ax.xaxis.label, short, w + gap - 0.1, mt)
    return fig


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
               label=f"imputed ({int(imp.sum())})"),
    ]
    if (~inside).any():
        handles.append(Line2D([], [], marker="x", linestyle="", color="0.55",
                              label=f"outside domain ({int((~inside).sum())})"))
    ax.legend(handles=handles, loc="best", fontsize="small", framealpha=0.8)


# --------------------------------------------------------------------------------------
