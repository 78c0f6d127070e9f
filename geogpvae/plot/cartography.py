"""Map data found offline (coastlines, borders) and longitudes across the dateline."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .style import _warn_once

__all__ = ["find_map_shapefile", "map_data_dirs"]


#: System folders that may hold cartopy's data besides ``cartopy.config`` (Debian's among them).
_SYSTEM_DATA_DIRS: tuple[Path, ...] = (
    Path("/usr/share/cartopy"),
    Path("/usr/share/cartopy/data"),
    Path("/usr/local/share/cartopy"),
)

_GEOMETRY_CACHE: dict[str, list[Any]] = {}



def map_data_dirs() -> list[Path]:
    """Folders searched for cartopy's shapefiles, in order, without downloading.

    ``cartopy.config``'s ``pre_existing_data_dir`` (unless empty), ``data_dir`` and ``repo_data_dir``,
    ``$CARTOPY_DATA_DIR``, then ``/usr/share/cartopy[/data]`` (Debian) and ``/usr/local/share/cartopy``.

    Returns
    -------
    list of pathlib.Path
        Folders, whether or not they exist, without duplicates.
    """
    dirs: list[Path] = []
    try:
        import cartopy

        cfg = cartopy.config
    except ImportError:
        cfg = {}
    for key in ("pre_existing_data_dir", "data_dir", "repo_data_dir"):
        p = cfg.get(key)
        if p is not None and str(p) not in ("", "."):
            dirs.append(Path(p))
    env = os.environ.get("CARTOPY_DATA_DIR")
    if env:
        dirs.append(Path(env))
    dirs.extend(_SYSTEM_DATA_DIRS)
    seen: set[str] = set()
    unique = []
    for d in dirs:
        if str(d) not in seen:
            seen.add(str(d))
            unique.append(d)
    return unique


def _shapefile_complete(path: Path) -> bool:
    return all(path.with_suffix(ext).is_file() for ext in (".shp", ".shx", ".dbf"))


def find_map_shapefile(
    name: str = "coastline",
    category: str = "physical",
    resolutions: Sequence[str] = ("110m", "50m", "10m"),
) -> Path | None:
    """The path of a Natural Earth shapefile on disk, or None, never downloading.

    Searches :func:`map_data_dirs` for ``shapefiles/natural_earth/{category}/ne_{resolution}_{name}.shp``
    (cartopy's layout), resolutions in order; only a file with its ``.shx`` and ``.dbf`` counts.

    Parameters
    ----------
    name : str
        Natural Earth name, e.g. ``"coastline"`` or ``"admin_0_boundary_lines_land"``.
    category : {"physical", "cultural"}
    resolutions : sequence of str
        Preferred resolutions, best first.

    Returns
    -------
    pathlib.Path or None
    """
    for res in resolutions:
        for d in map_data_dirs():
            p = d / "shapefiles" / "natural_earth" / category / f"ne_{res}_{name}.shp"
            if _shapefile_complete(p):
                return p
    return None


def _find_gshhs(scale: str = "c", level: int = 1) -> Path | None:
    for d in map_data_dirs():
        p = d / "shapefiles" / "gshhs" / scale / f"GSHHS_{scale}_L{level}.shp"
        if _shapefile_complete(p):
            return p
    return None


def _geometries(path: Path) -> list[Any]:
    key = str(path)
    if key not in _GEOMETRY_CACHE:
        import shapefile  # pyshp, what cartopy reads shapefiles with
        from cartopy.io import shapereader

        # GSHHS (Debian's offline coastlines) has rings pyshp reports on stdout, shape by shape
        verbose, shapefile.VERBOSE = getattr(shapefile, "VERBOSE", False), False
        try:
            _GEOMETRY_CACHE[key] = list(shapereader.Reader(str(path)).geometries())
        finally:
            shapefile.VERBOSE = verbose
    return _GEOMETRY_CACHE[key]


def _add_map_features(ax, ccrs, span_deg: float, coastlines: bool, borders: bool) -> None:
    """Coastlines and borders from shapefiles on disk, or one warning when missing."""
    from cartopy.feature import ShapelyFeature

    if span_deg < 25:
        res = ("10m", "50m", "110m")
    elif span_deg < 100:
        res = ("50m", "110m", "10m")
    else:
        res = ("110m", "50m", "10m")
    missing = []
    if coastlines:
        path = find_map_shapefile("coastline", "physical", res) or _find_gshhs("c", 1)
        if path is None:
            missing.append("coastlines")
        else:
            feature = ShapelyFeature(_geometries(path), ccrs.PlateCarree())
            artist = ax.add_feature(feature, facecolor="none", edgecolor="0.15", linewidth=0.6)
            artist.set_gid("coastlines")
    if borders:
        path = find_map_shapefile("admin_0_boundary_lines_land", "cultural", res)
        if path is None:
            missing.append("borders")
        else:
            feature = ShapelyFeature(_geometries(path), ccrs.PlateCarree())
            artist = ax.add_feature(
                feature, facecolor="none", edgecolor="0.3", linewidth=0.5, linestyle=":"
            )
            artist.set_gid("borders")
    if missing:
        _warn_once(
            "map-data",
            f"no {' or '.join(missing)} on the map: the Natural Earth files are not on this "
            "machine (nothing is downloaded; set CARTOPY_DATA_DIR to a folder holding them)",
        )


def _import_cartopy():
    """``cartopy.crs`` or None, with a single warning when cartopy is missing."""
    try:
        import cartopy.crs as ccrs
        import cartopy.feature
        import cartopy.io.shapereader  # noqa: F401  (needed for the map data)
    except ImportError:
        _warn_once(
            "cartopy",
            "cartopy is not available, so lon/lat maps are drawn on plain axes without a "
            "projection; install geogpvae[maps] for projected maps.",
        )
        return None
    return ccrs




def _lon_start(lon: np.ndarray) -> float:
    """Start of the shortest arc that holds all longitudes (after the largest gap)."""
    lon = np.asarray(lon, dtype=float)
    u = np.unique(np.mod(lon[np.isfinite(lon)], 360.0))
    if u.size == 0:
        return 0.0
    if u.size == 1:
        return float(u[0])
    gaps = np.diff(np.r_[u, u[0] + 360.0])
    k = int(np.argmax(gaps))
    if gaps[-1] >= gaps[k] * (1 - 1e-6):  # prefer not to move the seam
        k = gaps.size - 1
    return float(u[(k + 1) % u.size])


def _contiguous_lon(lon: np.ndarray) -> np.ndarray:
    """Longitudes unwrapped onto one arc, e.g. 170..190 rather than 170..180, -180..-170.

    A monotonic grid whose own seam is at least its largest step is kept (``0..357.5``, ``-180..177.5``).
    """
    lon = np.asarray(lon, dtype=float)
    if lon.size > 1:
        d = np.diff(lon)
        if np.all(d > 0) or np.all(d < 0):
            lo, hi = float(np.min(lon)), float(np.max(lon))
            if hi - lo < 360 and (lo + 360 - hi) >= np.max(np.abs(d)) * (1 - 1e-6):
                return lon
    start = _lon_start(lon)
    turns = np.floor((lon - start) / 360.0)
    return np.where(turns != 0, lon - 360.0 * turns, lon)


