"""SPE10 model 2 (Christie & Blunt 2001): porosity and permeability of a 60 x 220 x 85 reservoir."""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import xarray as xr

from .registry import _SPE10_NPZ, REGISTRY, _check, _not_found, _read_verified, _resolve_root

__all__ = ["SPE10_SHAPE", "SPE10_CELL_SIZE", "load_spe10"]


#: SPE10 model 2 array shape, (nz, ny, nx) = (85, 220, 60); layer 1 is index 0.
SPE10_SHAPE: tuple[int, int, int] = (85, 220, 60)
#: SPE10 cell size in metres along z, y, x (2 ft, 10 ft, 20 ft).
SPE10_CELL_SIZE: dict[str, float] = {"z": 0.6096, "y": 3.048, "x": 6.096}
_SPE10_TARBERT_LAYERS = 35  # layers 1-35 Tarbert, 36-85 Upper Ness
_SPE10_VARIABLES = ("porosity", "kx", "ky", "kz")


_WS = re.compile(rb"\s")


def _parse_numbers(data: bytes, count: int, name: str, chunk: int = 1 << 22) -> np.ndarray:
    """Parse exactly ``count`` whitespace-separated numbers from ASCII text, in pieces of about ``chunk`` bytes."""
    out = np.empty(count, dtype=np.float64)
    n = pos = 0
    end_all = len(data)
    while pos < end_all:
        end = min(pos + chunk, end_all)
        if end < end_all:
            m = _WS.search(data, end)
            end = m.start() if m else end_all
        tokens = data[pos:end].split()
        k = len(tokens)
        if n + k > count:
            raise ValueError(f"{name}: more than the expected {count} values")
        if k:
            try:
                out[n : n + k] = np.array(tokens, dtype=np.float64)
            except ValueError as err:
                raise ValueError(f"{name}: {err}") from None
        n += k
        pos = end
    if n != count:
        raise ValueError(f"{name}: found {n} values, expected {count}")
    return out


def _parse_spe10_blocks(data: bytes, n_blocks: int, shape: tuple[int, int, int] = SPE10_SHAPE,
                        name: str = "SPE10 text") -> np.ndarray:
    """SPE10 text of ``n_blocks`` whole blocks (x fastest, then y, then z) as (n_blocks, nz, ny, nx), in file order."""
    return _parse_numbers(data, n_blocks * int(np.prod(shape)), name).reshape(n_blocks, *shape)


def _downsample(a: np.ndarray, k: int) -> np.ndarray:
    return a if k == 1 else np.ascontiguousarray(a[::k, ::k, ::k])


#: One millidarcy as a UDUNITS unit string (UDUNITS has no darcy): the ``units`` of the SPE10 permeabilities.
MILLIDARCY = "9.869233e-16 m2"

_SPE10_VAR_ATTRS = {
    "porosity": {"units": "1", "long_name": "porosity",
                 "comment": "pore volume fraction; 0 in inactive (non-reservoir) cells"},
    "kx": {"units": MILLIDARCY, "long_name": "permeability in the x direction (mD)"},
    "ky": {"units": MILLIDARCY, "long_name": "permeability in the y direction (mD)"},
    "kz": {"units": MILLIDARCY, "long_name": "permeability in the z (vertical) direction (mD)"},
}


def load_spe10(
    downsample: int = 1,
    data_dir: str | Path | None = None,
    *,
    variables: Sequence[str] | None = None,
    source: Literal["auto", "npz", "dat"] = "auto",
) -> xr.Dataset:
    """Load porosity and permeability of SPE10 model 2 (Christie & Blunt 2001), float64 as in the files.

    60 x 220 x 85 cells of 6.096 m x 3.048 m x 0.6096 m (20 ft x 10 ft x 2 ft); layers 1-35 (from
    the top) are the Tarbert formation, 36-85 the Upper Ness. Reads ``<data dir>/spe10/spe10.npz``
    when present, else the SPE archive's ``spe_phi.dat`` + ``spe_perm.dat``, each checked against
    :data:`REGISTRY` (sha256; git blob SHA-1 for ``spe_perm.dat``).

    Parameters
    ----------
    downsample : int, default 1
        Keep every k-th cell along each axis: 1 gives (85, 220, 60), 2 gives (43, 110, 30).
    data_dir : str or Path, optional
        Data directory holding ``spe10/``; default: see :func:`data_home`.
    variables : sequence of str, optional
        Subset of ``("porosity", "kx", "ky", "kz")`` (default all); porosity alone needs only ``spe_phi.dat``.
    source : {"auto", "npz", "dat"}
        Which files to read; ``"auto"`` prefers ``spe10.npz``.

    Returns
    -------
    xarray.Dataset
        On dims ``(z, y, x)``: coordinates ``x``, ``y`` (m, cell centres), ``z`` (m, depth of the cell
        centre, ``positive: "down"``, layer 1 first), ``layer`` (1-based) and ``formation`` (along z);
        ``porosity`` (fraction, 0 in 27,579 inactive cells at full resolution) and ``kx``, ``ky``, ``kz`` (mD).

    Raises
    ------
    DataFileNotFoundError, ChecksumError
        No usable file set is present, or a file differs from the reference copy.
    ValueError
        Bad ``downsample``, ``variables`` or ``source``.
    """
    try:
        k = operator.index(downsample)
    except TypeError:
        raise TypeError(f"downsample must be an integer, got {downsample!r}") from None
    if isinstance(downsample, bool) or k < 1:
        raise ValueError(f"downsample must be a positive integer, got {downsample!r}")
    if variables is None:
        wanted = list(_SPE10_VARIABLES)
    else:
        wanted = [variables] if isinstance(variables, str) else list(variables)
        bad = [v for v in wanted if v not in _SPE10_VARIABLES]
        if bad or not wanted or len(set(wanted)) != len(wanted):
            raise ValueError(
                f"variables must be distinct names from {list(_SPE10_VARIABLES)}, got {wanted}"
            )
    if source not in ("auto", "npz", "dat"):
        raise ValueError(f"source must be 'auto', 'npz' or 'dat', got {source!r}")

    root, how = _resolve_root("spe10", data_dir)
    folder = root / "spe10"
    dat_needed = (["spe_phi.dat"] if "porosity" in wanted else []) + (
        ["spe_perm.dat"] if set(wanted) - {"porosity"} else []
    )
    npz_path = folder / _SPE10_NPZ
    if source == "npz" or (source == "auto" and npz_path.is_file()):
        if not npz_path.is_file():
            raise _not_found("spe10", folder, how, [_SPE10_NPZ])
        arrays = _read_spe10_npz(npz_path, wanted, k)
        files = [_SPE10_NPZ]
    else:
        missing = [n for n in dat_needed if not (folder / n).is_file()]
        if missing:
            if source == "auto":
                missing = [_SPE10_NPZ + " (or " + " + ".join(missing) + ")"]
            raise _not_found("spe10", folder, how, missing)
        arrays = _read_spe10_dat(folder, wanted, k)
        files = dat_needed
    return _spe10_dataset(arrays, k, files)


def _read_spe10_npz(path: Path, wanted: Sequence[str], k: int) -> dict[str, np.ndarray]:
    _check(path, REGISTRY[f"spe10/{_SPE10_NPZ}"])
    names = {"porosity": "phi", "kx": "kx", "ky": "ky", "kz": "kz"}
    out = {}
    with np.load(path, allow_pickle=False) as npz:
        for var in wanted:
            a = npz[names[var]]
            if a.shape != SPE10_SHAPE or a.dtype != np.float64:
                raise ValueError(f"{path}: array {names[var]} is {a.dtype} {a.shape}, "
                                 f"expected float64 {SPE10_SHAPE}")
            out[var] = _downsample(a, k)
            del a
    return out


def _read_spe10_dat(folder: Path, wanted: Sequence[str], k: int) -> dict[str, np.ndarray]:
    out = {}
    if "porosity" in wanted:
        data = _read_verified(folder / "spe_phi.dat", "spe10/spe_phi.dat")
        out["porosity"] = _downsample(_parse_spe10_blocks(data, 1, name="spe_phi.dat")[0], k)
        del data
    perm_vars = [v for v in wanted if v != "porosity"]
    if perm_vars:
        data = _read_verified(folder / "spe_perm.dat", "spe10/spe_perm.dat")
        blocks = _parse_spe10_blocks(data, 3, name="spe_perm.dat")
        del data
        keep_views = k == 1 and len(perm_vars) == 3  # views share the one parsed array
        for i, var in enumerate(("kx", "ky", "kz")):
            if var in perm_vars:
                out[var] = blocks[i] if keep_views else np.ascontiguousarray(
                    blocks[i, ::k, ::k, ::k])
        del blocks
    return {v: out[v] for v in wanted}


def _spe10_dataset(arrays: dict[str, np.ndarray], k: int, files: Sequence[str]) -> xr.Dataset:
    nz, ny, nx = SPE10_SHAPE
    iz, iy, ix = (np.arange(0, n, k) for n in (nz, ny, nx))
    layer = iz + 1
    formation = np.where(layer <= _SPE10_TARBERT_LAYERS, "Tarbert", "Upper Ness")
    coords = {
        "z": ("z", (iz + 0.5) * SPE10_CELL_SIZE["z"], {
            "units": "m", "axis": "Z", "positive": "down",
            "long_name": "depth of the cell centre below the top of the model"}),
        "y": ("y", (iy + 0.5) * SPE10_CELL_SIZE["y"], {
            "units": "m", "axis": "Y", "standard_name": "projection_y_coordinate",
            "long_name": "y coordinate of the cell centre"}),
        "x": ("x", (ix + 0.5) * SPE10_CELL_SIZE["x"], {
            "units": "m", "axis": "X", "standard_name": "projection_x_coordinate",
            "long_name": "x coordinate of the cell centre"}),
        "layer": ("z", layer.astype(np.int32), {
            "long_name": "layer number, 1 at the top", "units": "1"}),
        "formation": ("z", formation.astype(str), {
            "long_name": "geological formation",
            "comment": "layers 1-35 Tarbert, 36-85 Upper Ness"}),
    }
    data_vars = {v: (("z", "y", "x"), a, _SPE10_VAR_ATTRS[v]) for v, a in arrays.items()}
    attrs = {
        "title": "SPE10 model 2: porosity and permeability (Tenth SPE Comparative Solution "
                 "Project)",
        "source": "SPE Comparative Solution Project archive por_perm_case2a.zip; read from "
                  + ", ".join(files),
        "references": "Christie, M. A. and Blunt, M. J. (2001). Tenth SPE Comparative "
                      "Solution Project: a comparison of upscaling techniques. SPE Reservoir "
                      "Evaluation & Engineering 4(4), 308-317. doi:10.2118/72469-PA",
        "formations": "Tarbert: layers 1-35 (top, shallow-marine, smooth); Upper Ness: "
                      "layers 36-85 (fluvial, channelised)",
        "cell_size_m": "dx = 6.096 m (20 ft), dy = 3.048 m (10 ft), dz = 0.6096 m (2 ft)",
        "downsample": np.int32(k),
        "license": "published by the Society of Petroleum Engineers for the comparative "
                   "solution project; see the SPE terms",
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


