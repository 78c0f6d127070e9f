"""Maps of a field on a grid or at scattered sites, in lon/lat (cartopy) or plain x/y:
:func:`field_map`, which puts together the geometry (:mod:`.map_geometry`), the frame
(:mod:`.map_view`) and the panels (:mod:`.map_panels`), or hands a field without a map to
:func:`~geogpvae.plot.profile` (:mod:`.map_or_profile`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import xarray as xr
from matplotlib.figure import Figure

from .conventions import _choose_label, _Field
from .curvilinear import _curvilinear
from .map_geometry import _map_geometry, _map_panels, _redrawn_as
from .map_or_profile import _profile_instead
from .map_panels import (
    _draw_map_panel,
    _fit_projected_height,
    _frame_map_panel,
    _map_colourbars,
    _PanelStyle,
    _site_legend,
)
from .map_view import _map_size, _MapView
from .style import UNCERTAINTY_CMAP, _plt, _units_suffix, is_log_variable

__all__ = ["field_map"]


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
