"""Maps of a field on a grid or at scattered sites, in lon/lat (cartopy) or plain x/y.

:func:`field_map` puts together the geometry (:mod:`.map_geometry`), the frame (:mod:`.map_view`)
and the panels (:mod:`.map_panels`), or hands a field without a map to :func:`~geogpvae.plot.profile`.
"""

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
    _trim_slack,
    _PanelStyle,
    _site_legend,
)
from .map_view import _map_size, _MapView
from .style import UNCERTAINTY_CMAP, _plt, _units_suffix, is_log_variable

__all__ = ["field_map"]


#: Imputed cells are outlined by default where a cell is drawn at least this wide and tall, in inches
OUTLINED_CELL = 0.08


def _outlined(outline_holes: bool | None, p: Any, size: Any) -> bool:
    if outline_holes is not None:
        return bool(outline_holes)
    rows, cols = p.imp.shape[-2:] if p.imp.ndim >= 2 else (1, p.imp.size)
    return min(size.w / max(cols, 1), size.h / max(rows, 1)) >= OUTLINED_CELL


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
    outline_holes: bool | None = None,
    marker_size: float | None = None,
    panel_width: float = 3.3,
    figsize: tuple[float, float] | None = None,
    raster: bool = True,
) -> Figure:
    """Maps of an imputed field, its std, and with ``truth`` the truth and the error.

    Panels, left to right: the field, the truth, the std (with ``std``) and ``|field - truth|``; std
    and error show imputed cells or sites only. Value panels share one norm and colourbar, as do std
    and error. Without ``v_imputed`` (``GPVAEImputer.predict`` output) a positive std marks imputed.

    Grids are drawn with ``pcolormesh`` on cell edges, sites (one dim with ``x``/``y`` or ``lon``/``lat``)
    as observed circles, imputed triangles and outside grey crosses; cells without a value are grey,
    outside the domain white. lon/lat data go on a cartopy GeoAxes with Natural Earth coastlines and
    borders found on disk (:func:`~geogpvae.plot.find_map_shapefile`; never downloaded, else one warning).
    Curvilinear grids (2-D lon, lat) are drawn as cells, or as points when global or with NaN centres;
    NEMO's placeholder cells (lon = lat = 0) are blank. One dim and no sites: :func:`~geogpvae.plot.profile`.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
    truth : xarray.DataArray or xarray.Dataset, optional
        The complete field on the same grid or sites, or a Dataset that holds ``var``.
    std : bool
        Add the predictive standard deviation panel.
    projection : cartopy CRS or str, optional
        For lon/lat data; a string names one centred on the data: ``"PlateCarree"``,
        ``"LambertAzimuthalEqualArea"``, ``"Mercator"`` or ``"Robinson"``. Default: PlateCarree with no
        cell on the seam for 300 degrees of longitude or more; polar stereographic, turned to the grid's
        rows (:func:`~geogpvae.plot.polar.polar_centre`), for a polar cap; Lambert azimuthal equal-area
        under 60 degrees; else PlateCarree centred on the data.
    coords : {"auto", "lonlat", "xy"}
        Which coordinates scattered data with both use; ``"auto"`` prefers lon/lat.
    isel : mapping of str to int, optional
        Index of the other dims (e.g. ``{"time": 3}``), default 0; an index of the site dim of
        ``(time, station)`` data draws that site as a :func:`~geogpvae.plot.profile`.
    log : bool, optional
        Log colour norm; by default that of the variable's ``geogpvae_transform``.
    cmap, std_cmap : str or Colormap, optional
        Colour maps for the values and for std and error.
    percentiles : tuple of float
        Robust colour limits, in percent.
    coastlines, borders : bool
        Draw these when the shapefiles are found on disk.
    outline_holes : bool, optional
        Outline the imputed cells of gridded data on the field panel. By default only where a cell
        is drawn at least :data:`OUTLINED_CELL` inches wide and tall, so that outlines do not bury
        a dense grid in a black mesh.
    marker_size : float, optional
        Marker area for scattered data, in points squared.
    panel_width : float
        Width of one panel, in inches.
    figsize : tuple of float, optional
        Overrides ``panel_width``; by default a fixed-aspect map gets the height its aspect asks for.
    raster : bool
        Draw sites on a regular lattice (filling a quarter of it or more) as raster cells, missing nodes white.

    Returns
    -------
    matplotlib.figure.Figure
        Panel gids ``"imputed"``, ``"truth"``, ``"std"``, ``"error"``; scatter gids ``"observed"``,
        ``"imputed"``, ``"outside"``, and ``"context"`` for the grey observed sites on std and error.
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
                                   layout="constrained")
    mappables = {}
    for ax, key in zip(axes, p.keys, strict=True):
        mappables[key] = _draw_map_panel(ax, key, g, p, style, view, _outlined(outline_holes, p, size))
        _frame_map_panel(ax, g, view, first=ax is axes[0], coastlines=coastlines, borders=borders,
                         same_units=size.same_units)
    h = _fit_projected_height(fig, axes[0], size) if size.auto and view.ccrs is not None else size.h
    # the constrained layout puts the bars beyond the panels' labels: the pad is the gap under them
    _map_colourbars(fig, axes, mappables, p, f, var, pad=size.cbar_pad / h,
                    size=size)
    fig.suptitle(f.name + (" (" + ", ".join(g.notes) + ")" if g.notes else ""))
    if g.sites is not None:  # under the colour bars: it covers no site
        _site_legend(fig, p.obs, p.imp, p.inside)
    _finish(fig, axes, g, view, size)
    return fig


def _finish(fig, axes, g: Any, view: Any, size: Any) -> None:
    """Anchors, short x labels where long ones do not fit, and a figure without empty bands."""
    for ax in axes:
        # a panel its aspect makes shorter than its box stays under its title
        ax.set_anchor("N")
    if view.ccrs is None and not g.is_lonlat:  # long x labels give way to "x [m]"
        short = g.hname + (_units_suffix(g.hattr.attrs.get("units")) if g.hattr is not None else "")
        for ax in axes:
            _choose_label(ax.xaxis.label, short, size.w + size.gap - 0.1, size.mt)
    if size.fixed and size.auto:
        _trim_slack(fig, axes)
