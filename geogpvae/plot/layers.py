"""Layer slices of a gridded field: observed, imputed, truth, std and error panels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from .conventions import (
    PANEL_TITLES,
    _axis_label,
    _centres,
    _choose_label,
    _coord,
    _Field,
    _is_vertical,
    _Metrics,
    _orient,
    _positive_down,
    _short_label,
    _status,
    _tick_chars,
    _uncertainty_label,
    _units_of,
)
from .style import (
    UNCERTAINTY_CMAP,
    VALUE_CMAP,
    _cmap,
    _colourbar,
    _draw_domain,
    _edges,
    _layer_note,
    _masked,
    _panel_norms,
    _plt,
    _scalar_notes,
    is_log_variable,
    label_for,
)

__all__ = ["layer_positions", "layers"]

def _layer_numbers(da: xr.DataArray, axis: str) -> np.ndarray:
    """The number of each layer along ``axis``: a ``layer`` coordinate, else 1..n."""
    c = da.coords.get("layer")
    if c is not None and c.dims == (axis,) and np.issubdtype(c.dtype, np.integer):
        return np.asarray(c.values)
    return np.arange(1, da.sizes[axis] + 1)


def _describe_layers(da: xr.DataArray, axis: str, numbers: np.ndarray) -> str:
    text = f"layers along {axis!r} are numbered {numbers[0]} to {numbers[-1]}"
    if len(numbers) > 1 and not np.array_equal(np.diff(numbers), np.ones(len(numbers) - 1)):
        text += f" (every {int(numbers[1] - numbers[0])})" if len(set(np.diff(numbers))) == 1 else ""
    c = da.coords.get(axis)
    if c is not None and c.dims == (axis,) and np.issubdtype(c.dtype, np.number):
        units = c.attrs.get("units", "")
        lo, hi = float(np.min(c.values)), float(np.max(c.values))
        text += f", or give a {axis} value from {lo:g} to {hi:g}{' ' + units if units else ''}"
    return text


def layer_positions(da: xr.DataArray, axis: str, layer: Any = None) -> list[int]:
    """Positions along ``axis`` of the layers that ``layer`` names (as ``geogpvae plot --layer``).

    An integer is a layer number: a ``layer`` coordinate along ``axis`` where there is one (SPE10 keeps
    the full model's), else the position from 1. A float is a coordinate value: the nearest layer within
    half a cell (on a boundary, the first). A sequence gives several; ``None`` the first layer.

    Parameters
    ----------
    da : xarray.DataArray
    axis : str
        The dim along which layers are taken.
    layer : int, float, sequence of them, or None

    Returns
    -------
    list of int
        0-based positions along ``axis``.

    Raises
    ------
    ValueError
        A layer that is not there, with the valid numbers and coordinate range.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((4, 2)), dims=("z", "x"),
    ...                   coords={"z": ("z", [0.5, 1.5, 2.5, 3.5], {"units": "m"})})
    >>> layer_positions(da, "z", [1, 4]), layer_positions(da, "z", 2.4)
    ([0, 3], [2])
    """
    n = da.sizes[axis]
    if layer is None:
        return [0]
    requested = list(layer) if isinstance(layer, (list, tuple, np.ndarray)) else [layer]
    if not requested:
        raise ValueError("no layer requested")
    numbers = _layer_numbers(da, axis)
    coord = da.coords.get(axis)
    out = []
    for item in requested:
        if isinstance(item, str):
            item = item.strip()
            item = int(item) if item.lstrip("+-").isdigit() else float(item)
        if isinstance(item, (bool, np.bool_)):  # one error type (ValueError) for every bad layer
            raise ValueError(f"layer {item!r} is not a layer number or a {axis} value")  # noqa: TRY004
        if isinstance(item, (int, np.integer)):
            hits = np.flatnonzero(numbers == item)
            if hits.size == 0:
                raise ValueError(f"there is no layer {item}: {_describe_layers(da, axis, numbers)}")
            out.append(int(hits[0]))
            continue
        value = float(item)
        if coord is None or coord.dims != (axis,) or not np.issubdtype(coord.dtype, np.number):
            raise ValueError(
                f"{axis!r} has no numeric coordinate to look {value:g} up in: give a layer "
                f"number instead ({_describe_layers(da, axis, numbers)})"
            )
        c = np.asarray(coord.values, dtype=float)
        k = int(np.nanargmin(np.abs(c - value)))
        half = 0.5 * (float(np.min(np.abs(np.diff(c)))) if n > 1 else max(abs(c[0]), 1.0) * 1e-9)
        if not abs(c[k] - value) <= half * (1 + 1e-9):
            raise ValueError(
                f"{axis} = {value:g} is not inside any layer: {_describe_layers(da, axis, numbers)}"
            )
        out.append(k)
    return out


def layers(
    ds: xr.Dataset,
    var: str,
    layer: int | float | Sequence[int | float] | None = None,  # noqa: PYI041 - int: layer number
    axis: str = "z",
    truth: xr.DataArray | xr.Dataset | None = None,
    *,
    log: bool | None = None,
    cmap: Any = None,
    std_cmap: Any = UNCERTAINTY_CMAP,
    percentiles: tuple[float, float] = (1.0, 99.0),
    share: str = "all",
    aspect: str | float | None = "auto",
    panel_width: float = 2.1,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Layers of a 3-D field: observed, imputed, std and, with ``truth``, truth and error.

    One row per layer; panels: observed values (holes grey), imputed field, truth, predictive std and
    ``|imputed - truth|`` (these two at imputed cells only). Cells without a value are grey, outside
    the domain white; without ``v_imputed`` a positive std marks imputed. Value panels share one norm,
    as do std and error (same units, comparable by colour; log for a log-marked variable).
    ``pcolormesh`` on cell edges: x grows right, y up, a ``positive: "down"`` coordinate down.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
    layer : int, float, sequence of them, or None
        As :func:`layer_positions` takes them (default: the first layer). Titles read "layer 21
        (z = 12.5 m)", vertical sections the coordinate value only.
    axis : str
        Dim to slice along: ``"z"`` horizontal layers, ``"x"`` or ``"y"`` vertical sections. A 2-D
        variable without ``axis`` is one row, with ``layer`` None or 1 (else ValueError).
    truth : xarray.DataArray or xarray.Dataset, optional
        The complete field on the same grid, or a Dataset that holds ``var``.
    log : bool, optional
        Log colour norm; by default where ``geogpvae_transform == "log"``.
    cmap, std_cmap : str or Colormap, optional
        Colour maps for the values and for std and error.
    percentiles : tuple of float
        Robust colour limits, in percent of the finite values drawn.
    share : {"all", "row"}
        Colour limits shared by all rows (colourbars below) or per row (colourbars beside).
    aspect : "auto", "equal", float or None
        ``"auto"``: equal when both axes have the same units and neither is vertical, else free.
    panel_width : float
        Width of one panel, in inches.
    figsize : tuple of float, optional
        Overrides ``panel_width``; by default a fixed aspect sets the height.

    Returns
    -------
    matplotlib.figure.Figure
        Panels and their QuadMeshes have gids ``"observed"``, ``"imputed"``, ``"truth"``, ``"std"``,
        ``"error"``; x labels on the bottom row, y labels on the first column (``"x [m]"`` if narrow).
    """
    if share not in ("all", "row"):
        raise ValueError("share must be 'all' or 'row'")
    f = _Field(ds, var, truth)
    rows = [_layer_row(f, sel) for sel in _layer_selections(f.value, var, axis, layer)]
    use_log = is_log_variable(f.value) if log is None else bool(log)
    value_keys = [k for k in ("observed", "imputed", "truth") if k in rows[0].panels]
    unc_keys = [k for k in ("std", "error") if k in rows[0].panels]
    aspect, box = _layer_aspect(rows[0], aspect)
    wheres = [_row_note(f.value, row) for row in rows]
    size = _layer_size(rows, len(value_keys), len(unc_keys), box, any(wheres), share=share,
                       aspect=aspect, panel_width=panel_width, figsize=figsize)
    fig, axes = _plt().subplots(
        len(rows), len(value_keys) + len(unc_keys), figsize=size.figsize, squeeze=False,
        sharex=True, sharey=True,
        # "compressed" pulls panels of a fixed aspect, their titles and colourbars together
        layout="compressed" if aspect is not None else "constrained",
    )
    cmaps = (_cmap(cmap or VALUE_CMAP), _cmap(std_cmap))

    def norms(row_panels: list[dict[str, np.ma.MaskedArray]]) -> tuple[Any, Any]:
        return _panel_norms([p[k] for p in row_panels for k in value_keys],
                            [p[k] for p in row_panels for k in unc_keys], percentiles, use_log)

    all_norms = norms([r.panels for r in rows]) if share == "all" else None
    meshes: dict[str, list[Any]] = {}
    for r, row in enumerate(rows):
        row_norms = all_norms if all_norms is not None else norms([row.panels])
        drawn = _draw_layer_row(axes[r], row, value_keys, unc_keys, row_norms, cmaps, wheres[r],
                                bottom=r == len(rows) - 1, aspect=aspect)
        for key, mesh in drawn.items():
            meshes.setdefault(key, []).append(mesh)
        if share == "row":
            _colourbars(fig, axes[r], meshes, value_keys, unc_keys, f, r, "right", size.cbar_pads)
    if share == "all":
        _colourbars(fig, axes, meshes, value_keys, unc_keys, f, 0, "bottom", size.cbar_pads)
    _fit_axis_labels(axes, rows, size)
    return fig


@dataclass
class _LayerRow:
    """One layer: its 2-D slice (vertical dim first), the arrays of its panels, the domain."""

    sel: dict[str, int]
    v: xr.DataArray
    hdim: str
    vdim: str
    panels: dict[str, np.ma.MaskedArray]
    inside: np.ndarray


def _layer_selections(da: xr.DataArray, var: str, axis: str, layer: Any) -> list[dict[str, int]]:
    """One ``isel`` per row: the requested layers along ``axis``, or one row for a 2-D field."""
    if axis in da.dims:
        return [{axis: k} for k in layer_positions(da, axis, layer)]
    if da.ndim == 2 and layer in (None, 1, [1], (1,)):  # one layer: the field itself
        return [{}]
    if da.ndim == 2:
        raise ValueError(
            f"{var!r} is a 2-D field (dims {da.dims}), one layer with no others along {axis!r}: "
            "leave the layer out (or ask for layer 1) to draw it, or name one of its dims as the axis"
        )
    raise ValueError(f"{var!r} has dims {da.dims}; axis {axis!r} is not one of them")


def _layer_row(f: _Field, sel: dict[str, int]) -> _LayerRow:
    """The panels of one layer: observed, imputed, truth, std and error (what there is)."""
    v = f.value.isel(sel)
    if v.ndim != 2:
        raise ValueError(f"a layer of {f.var!r} has dims {v.dims}; expected 2")
    hdim, vdim = _orient(v)
    order = (vdim, hdim)
    v = v.transpose(*order)
    flag = f.flag.isel(sel, missing_dims="ignore").transpose(*order) if f.flag is not None else None  # as realisations'
    std = f.std.isel(sel, missing_dims="ignore").transpose(*order) if f.std is not None else None
    observed, imputed, inside = _status(v, std, flag)
    if flag is None and std is None:
        imputed = None  # nothing tells the cells apart: no mask on the error panel
    value = _masked(v)
    panels: dict[str, np.ma.MaskedArray] = {
        "observed": np.ma.masked_where(~observed, value),
        "imputed": value,
    }
    if f.truth is not None:
        t = _masked(f.truth.isel(sel).transpose(*order))
        panels["truth"] = t
    if std is not None:
        s = _masked(std)
        panels["std"] = np.ma.masked_where(~imputed, s) if imputed is not None else s
    if f.truth is not None:
        err = np.ma.abs(value - t)
        panels["error"] = np.ma.masked_where(~imputed, err) if imputed is not None else err
    return _LayerRow(sel, v, hdim, vdim, panels, inside)


def _row_note(da: xr.DataArray, row: _LayerRow) -> str:
    """Which layer a row shows, for its panel titles ("layer 21 (z = 12.5 m)")."""
    if row.sel:
        (dim, k), = row.sel.items()
        return _layer_note(da, dim, k, number=_is_vertical(dim, _coord(da, dim)))
    return ", ".join(_scalar_notes(row.v))


def _layer_aspect(row: _LayerRow, aspect: str | float | None) -> tuple[str | float | None, float]:
    """The axes aspect (``"auto"`` resolved) and a panel's height over width."""
    v, hdim, vdim = row.v, row.hdim, row.vdim
    hedges, vedges = _edges(_centres(v, hdim)), _edges(_centres(v, vdim))
    hunits, vunits = _units_of(v, hdim), _units_of(v, vdim)
    vertical = _is_vertical(vdim, _coord(v, vdim)) or _is_vertical(hdim, _coord(v, hdim))
    if aspect == "auto":
        aspect = "equal" if (hunits is not None and hunits == vunits and not vertical) else None
    hext = float(np.ptp(hedges)) or 1.0
    vext = float(np.ptp(vedges)) or 1.0
    if aspect == "equal":
        box = vext / hext
    elif isinstance(aspect, (int, float)):
        box = aspect * vext / hext
    else:
        box = 0.75
    return aspect, float(np.clip(box, 0.35, 2.6))


@dataclass
class _LayerSize:
    """The figure size, a panel's width and height and the gaps, in inches."""

    figsize: tuple[float, float]
    w: float
    h: float
    gap: float
    cbar_pads: dict[str, float]  # as fractions of the extent of the panels of each bar
    mt: _Metrics


def _layer_size(rows: list[_LayerRow], nv: int, nu: int, box: float, titled: bool, *, share: str,
                aspect: Any, panel_width: float, figsize: tuple[float, float] | None) -> _LayerSize:
    """Size the figure and its panels from the text around them (titles, ticks, labels)."""
    vedges0 = _edges(_centres(rows[0].v, rows[0].vdim))
    ncols, nrows = nv + nu, len(rows)
    mt = _Metrics()
    title = mt.title(2 if titled else 1)
    left = (mt.w_pad + mt.lines(mt.label_font) + mt.label_pad + mt.tick
            + mt.digits(_tick_chars(float(vedges0.min()), float(vedges0.max()))))
    right = mt.w_pad + 0.03
    gap = 2 * mt.w_pad + mt.tick_mark  # between panels, which share their y tick labels
    between = title + mt.tick_mark + 2 * mt.h_pad + 0.02  # between rows
    cbar_pad = 0.1  # inches
    ncb = 2 if nu else 1
    if share == "all":
        width = panel_width * ncols + 0.8 if figsize is None else float(figsize[0])
        w = (width - left - right - (ncols - 1) * gap) / ncols
    else:  # colourbars right of each group: pad, bar (its height / 18), ticks and label
        fixed = cbar_pad + mt.tick + mt.digits(3) + mt.x_label() + mt.w_pad
        width = panel_width * ncols + 0.8 + 1.1 if figsize is None else float(figsize[0])
        w = ((width - left - right - (ncols - ncb) * gap - ncb * fixed)
             / (ncols + ncb * 0.9 * box / 18.0))
    w = max(w, 0.3)

    def bottom(w: float) -> float:
        if share == "all":  # ticks and label, under the panels and under the colourbars
            bar = 0.9 * (max(nv, nu) * w + (max(nv, nu) - 1) * gap) / 25.0
            return mt.h_pad + 2 * (mt.x_ticks() + mt.x_label()) + cbar_pad + bar
        return mt.h_pad + mt.x_ticks() + mt.x_label()

    if figsize is None:
        h = w * box
        figsize = (width, mt.h_pad + title + nrows * h + (nrows - 1) * between + bottom(w))
    else:
        h = (float(figsize[1]) - mt.h_pad - title - (nrows - 1) * between - bottom(w)) / nrows
        h = max(h, 0.3)
        if aspect is not None:  # the aspect shrinks the panels to fit
            w, h = min(w, h / box), min(h, w * box)
    if share == "all":
        rows_h = nrows * h + (nrows - 1) * between
        cbar_pads = {"value": cbar_pad / rows_h, "uncertainty": cbar_pad / rows_h}
    else:
        cbar_pads = {"value": cbar_pad / (nv * w + (nv - 1) * gap),
                     "uncertainty": cbar_pad / max(nu * w + (nu - 1) * gap, 0.1)}
    return _LayerSize(figsize, w, h, gap, cbar_pads, mt)


def _draw_layer_row(axes_row, row: _LayerRow, value_keys: list[str], unc_keys: list[str],
                    norms: tuple[Any, Any], cmaps: tuple[Any, Any], where: str, *, bottom: bool,
                    aspect: Any) -> dict[str, Any]:
    """Draw the panels of one row; their QuadMeshes by panel key."""
    hedges = _edges(_centres(row.v, row.hdim))
    vedges = _edges(_centres(row.v, row.vdim))
    meshes = {}
    for c, key in enumerate(value_keys + unc_keys):
        ax = axes_row[c]
        is_value = key in value_keys
        m = ax.pcolormesh(
            hedges, vedges, row.panels[key],
            cmap=cmaps[0] if is_value else cmaps[1],
            norm=norms[0] if is_value else norms[1],
            shading="flat",
            rasterized=True,
        )
        m.set_gid(key)
        ax.set_gid(key)
        _draw_domain(ax, hedges, vedges, row.inside)
        title = PANEL_TITLES[key]
        ax.set_title(f"{title}\n{where}" if where else title, fontsize="medium")
        meshes[key] = m
        if bottom:
            ax.set_xlabel(_axis_label(row.v, row.hdim))
        if c == 0:
            ax.set_ylabel(_axis_label(row.v, row.vdim))
    ax0 = axes_row[0]
    ax0.set_xlim(hedges.min(), hedges.max())
    if _positive_down(_coord(row.v, row.vdim)):
        ax0.set_ylim(vedges.max(), vedges.min())
    else:
        ax0.set_ylim(vedges.min(), vedges.max())
    if aspect is not None:
        for ax in axes_row:
            ax.set_aspect(aspect)
    return meshes


def _fit_axis_labels(axes, rows: list[_LayerRow], size: _LayerSize) -> None:
    """Anchor the panels under their titles; long axis labels give way to "x [m]"."""
    for ax in axes.ravel():
        ax.set_anchor("N")  # a panel shorter than its box stays under its title
    last = rows[-1]
    for ax in axes[-1]:
        _choose_label(ax.xaxis.label, _short_label(last.v, last.hdim), size.w + size.gap - 0.1,
                      size.mt)
    for ax, row in zip(axes[:, 0], rows, strict=True):
        _choose_label(ax.yaxis.label, _short_label(row.v, row.vdim), size.h, size.mt)


def _colourbars(fig, axes, meshes, value_keys, unc_keys, f: _Field, row, location, pads):
    """One colourbar under (or beside) the value panels, one for std and error; ``pads`` as fractions."""
    axes = np.atleast_2d(axes)
    nv = len(value_keys)
    kw = {"location": location, "shrink": 0.9, "aspect": 25 if location == "bottom" else 18}
    _colourbar(fig, meshes[value_keys[0]][row], axes[:, :nv].ravel().tolist(),
               label_for(f.value, f.var), "colorbar:value", pad=pads["value"], **kw)
    if unc_keys:
        _colourbar(fig, meshes[unc_keys[0]][row], axes[:, nv:].ravel().tolist(),
                   _uncertainty_label(f, unc_keys), "colorbar:uncertainty",
                   pad=pads["uncertainty"], **kw)
