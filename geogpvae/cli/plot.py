"""``geogpvae plot``: layer slices, a map, uncertainty panels or a residual variogram of an imputed file."""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import EXIT_OK, Reporter, UsageError
from ..engine.resources import check_declared_size
from .files import _open, check_target, expand_inputs

_PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg", "tif", "tiff", "eps", "ps")


def _plot_kind(args: argparse.Namespace, ndim: int) -> str:
    if args.layer is not None:
        return "layers"
    if args.uncertainty:
        return "uncertainty"
    if args.residual_variogram:
        return "residual variogram"
    if args.map or args.isel:
        return "map"
    return "layers" if ndim >= 3 else "map"


def _horizontal(da: Any, dim: str) -> bool:
    from ..plot.conventions import _coord, _is_lat, _is_lon, _is_x, _is_y

    return any(test(dim, _coord(da, dim)) for test in (_is_lon, _is_lat, _is_x, _is_y))


def _vertical(da: Any, dim: str) -> bool:
    """A vertical dim (:func:`~geogpvae.fields.scales.looks_vertical`)."""
    from ..fields.scales import looks_vertical

    return looks_vertical(dim, da.coords.get(dim))


def _layer_axis(da: Any, given: str | None) -> str:
    """``--axis``, else ``z``, else a vertical dim, else the first dim that is not horizontal."""
    if given is not None:
        return given
    if "z" in da.dims or da.ndim < 3:
        return "z"
    dims = [str(d) for d in da.dims]
    vertical = [d for d in dims if _vertical(da, d)]
    return vertical[0] if vertical else next((d for d in dims if not _horizontal(da, d)), dims[0])


def _fix_other_dims(ds: Any, var: str, axis: str, isel: dict[str, int] | None) -> dict[str, int]:
    """The slice of the dims a layer along ``axis`` cannot show (a layer is 2-D): ``--isel``'s
    index where it names them, else 0. A dim ``--isel`` names must be one of them."""
    da = ds[var]
    shown = [str(d) for d in da.dims if str(d) != axis]
    others = [d for d in shown if not _horizontal(da, d)][: max(len(shown) - 2, 0)]
    for dim, i in (isel or {}).items():
        if dim not in others:
            raise UsageError(f"--isel {dim}={i}: layers along {axis!r} of {var!r} draw its dims "
                             f"{', '.join(d for d in shown if d not in others)}; --isel can fix only "
                             f"{', '.join(others) or 'no other dim'}")
        if not -da.sizes[dim] <= i < da.sizes[dim]:
            raise UsageError(f"--isel {dim}={i}: {dim} has {da.sizes[dim]} positions (0 to {da.sizes[dim] - 1})")
    return {d: int((isel or {}).get(d, 0)) for d in others}


def _figure(ds: Any, var: str, kind: str, args: argparse.Namespace, truth: Any) -> Any:
    from .. import plot

    if kind == "layers":
        args.axis = _layer_axis(ds[var], args.axis)
        if args.axis not in ds[var].dims and ds[var].ndim >= 3:
            raise UsageError(f"--axis {args.axis}: not a dim of {var!r} (dims "
                             f"{', '.join(map(str, ds[var].dims))})")
        args.fixed = _fix_other_dims(ds, var, args.axis, args.isel)  # 4-D: one time step, say
        ds = ds.isel(args.fixed) if args.fixed else ds
        truth = truth.isel({d: i for d, i in args.fixed.items() if d in truth.dims}) if truth is not None else None
        da = ds[var]
        if args.axis not in da.dims:  # a single 2-D layer, or an error from layers()
            if args.layer not in (None, [1]) and da.ndim == 2:
                raise UsageError(
                    f"--layer: {var!r} is a 2-D field (dims {', '.join(map(str, da.dims))}), one "
                    f"layer with no others along {args.axis!r}: leave --layer out (or give 1) to draw it"
                )
            return plot.layers(ds, var, layer=args.layer, axis=args.axis, truth=truth)
        try:  # the layers are checked here so that a bad one is a usage error (exit 2)
            positions = plot.layer_positions(da, args.axis, args.layer)
        except ValueError as err:
            raise UsageError(f"--layer: {err}") from None
        # hand the layers on as layer numbers (positions from 1 without a layer coordinate), as layers() reads them
        c = da.coords.get("layer")
        keyed = c is not None and c.dims == (args.axis,) and c.dtype.kind in "iu"
        numbers = [int(c.values[k]) if keyed else k + 1 for k in positions]
        return plot.layers(ds, var, layer=numbers, axis=args.axis, truth=truth)
    if args.isel and kind != "map":
        raise UsageError(f"--isel picks the slice of a map or of layers; it does not apply to {kind} plots")
    if args.no_outlines and kind != "map":
        raise UsageError(f"--no-outlines is an option of maps; {kind} plots draw no outlines")
    if kind == "map":
        return plot.field_map(ds, var, truth=truth, isel=args.isel, outline_holes=False if args.no_outlines else None)
    if kind == "residual variogram":
        return plot.residual_variogram(ds, var, truth)
    return plot.uncertainty(ds, var, truth=truth)


def _default_variable(ds: Any) -> str:
    for name in ds.data_vars:
        if f"{name}_std" in ds.data_vars:
            return str(name)
    raise UsageError("the file holds no imputed variable (v with v_std); name one with --var")


def _save_figure(fig: Any, path: Path, dpi: int) -> None:
    import secrets

    fmt = path.suffix.lstrip(".").lower()
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def cmd_plot(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae plot``."""
    out = Path(args.output)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in _PLOT_FORMATS:
        raise UsageError(
            f"-o {args.output}: unknown figure format {out.suffix or '(none)'!r}; "
            f"use one of .{', .'.join(_PLOT_FORMATS)}"
        )
    if args.residual_variogram and not args.truth:
        raise UsageError("--residual-variogram needs --truth TRUTH.nc: the residuals are truth minus the fill")
    files = expand_inputs([args.input])
    check_target(args.output, inputs=files, overwrite=bool(args.overwrite), what="figure")
    import matplotlib

    matplotlib.use("Agg")
    with _open(files, None) as ds, warnings.catch_warnings():
        var = args.var or _default_variable(ds)
        if var not in ds.data_vars:
            raise UsageError(
                f"variable {var!r} is not in {args.input}; available: "
                f"{', '.join(map(str, ds.data_vars))}"
            )
        truth = _open(expand_inputs([args.truth]), None) if args.truth else None
        try:
            if args.quiet:  # the map's missing outlines are cosmetic: -q silences them
                warnings.filterwarnings("ignore", message="no (coastlines|borders|coastlines or borders) on the map")
                warnings.filterwarnings("ignore", message="cartopy is not available")
            kind = _plot_kind(args, ds[var].ndim)
            if kind != "layers":  # a layer figure reads one layer
                check_declared_size(ds, [v for v in (var, f"{var}_std", f"{var}_imputed") if v in ds.variables],
                                    source=str(args.input))
            fig = _figure(ds, var, kind, args, truth)
            kind = "profile" if any(ax.get_gid() == "profile" for ax in fig.axes) else kind  # --isel well=N
            along = f" along {args.axis}" if kind == "layers" and args.axis in ds[var].dims else ""
            along += "".join(f", {d}={i}" for d, i in getattr(args, "fixed", {}).items()) if kind == "layers" else ""
            hint = _map_hint(ds, var, kind, args.axis if args.axis in ds[var].dims else None)
            try:
                _save_figure(fig, out, args.dpi)
            finally:
                import matplotlib.pyplot as plt

                plt.close(fig)
        finally:
            if truth is not None:
                truth.close()
    Reporter(args.quiet)(f"wrote {args.output} ({kind} of {var}{along}){hint}")
    return EXIT_OK


def _map_hint(ds: Any, var: str, kind: str, axis: str | None) -> str:
    """Where layers of a curvilinear grid (2-D longitude/latitude, as ocean models write) were
    drawn in index space, or in the grid's own 1-D coordinates (projected x/y, rotated
    rlon/rlat): how to draw them on a map instead."""
    from ..plot.curvilinear import _curvilinear_coords

    found = _curvilinear_coords(ds, var, "auto") if kind == "layers" else None
    if found is None or axis is None or axis in found[0].dims:
        return ""
    lon, lat = (str(c.name) for c in found)
    grid = [str(d) for d in found[0].dims]
    own = all(d in ds.coords and ds[d].dims == (d,) for d in grid)  # projected x/y, rotated rlon/rlat
    drawn = f"drawn in its {'/'.join(grid)} coordinates" if own else "drawn in grid steps"
    return (f"; {drawn}: {var!r} has 2-D longitudes and latitudes ({lon}, {lat}), and "
            f"--map draws them on a map (--isel {axis}=N picks the {axis})")


