"""The one-file format of a trained :class:`~geogpvae.GPVAEImputer`: what it holds, how it is read.

Tensors and plain values only (numpy attribute values tagged by :func:`plain`), so the file is read
with ``weights_only=True`` and never runs pickled code.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._version import __version__
from .engine.config import GPVAEConfig
from .engine.core import GPVAEEngine, build_model
from .engine.data import resolve_device
from .engine.state import check_weight_shapes, format_version
from .errors import InputError, UnreadableFileError, one_line
from .fields.geometry import Geometry
from .fields.torch_files import read_torch_file



__all__ = ["SAVE_FORMAT", "SAVE_VERSION", "imputer_state", "plain", "read_imputer", "unplain"]

#: Format tag of files written by :meth:`GPVAEImputer.save <geogpvae.GPVAEImputer.save>`.
SAVE_FORMAT = "geogpvae-imputer"
#: Version of the format; files of a newer version are refused with a message.
SAVE_VERSION = 1


def plain(value: Any) -> Any:
    """An attribute value as plain Python: numbers, strings, None, lists and dicts.

    A numpy value becomes ``{"__numpy__": list, "dtype": str, "scalar": bool}``, anything else its ``str``.
    """
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind in "biufcSU":
            return {"__numpy__": arr.tolist(), "dtype": arr.dtype.str, "scalar": arr.ndim == 0}
        return str(value)
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)


def unplain(value: Any) -> Any:
    """Inverse of :func:`plain`: tagged numpy values become numpy values again (tuples stay lists)."""
    if isinstance(value, dict) and "__numpy__" in value:
        arr = np.asarray(value["__numpy__"], dtype=np.dtype(value["dtype"]))
        return arr[()] if value.get("scalar") else arr
    if isinstance(value, dict):
        return {k: unplain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unplain(v) for v in value]
    return value


def imputer_state(engine: dict[str, Any], settings: dict[str, Any], fitted: dict[str, Any]) -> dict[str, Any]:
    """What the file of a trained imputer holds, tagged with this format and version.

    Parameters
    ----------
    engine : dict
        The engine's state with its training field (:meth:`GPVAEEngine.state_dict`).
    settings : dict
        The imputer's constructor settings, as plain values.
    fitted : dict
        Its fitted attributes (variables, dimensions, geometry, transforms, attributes,
        dtypes, fingerprint), as plain values.

    Returns
    -------
    dict
        Tensors and plain values, tagged ``format`` :data:`SAVE_FORMAT` and ``version`` :data:`SAVE_VERSION`.
    """
    return {"format": SAVE_FORMAT, "version": SAVE_VERSION, "package_version": __version__,
            "engine": engine, "settings": settings, "fitted": {**fitted, "bounds_in_values": True}}


def read_imputer(
    path: str | os.PathLike[str], *, device: str | None, progress: bool | str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a file written by :func:`imputer_state` holds: the :class:`~geogpvae.GPVAEImputer`
    constructor's ``arguments`` and its ``fitted`` attributes by name (the trained engine among them).

    ``device`` and ``progress`` override the saved settings (None: as saved).

    Raises
    ------
    UnreadableFileError
        Not a geogpvae model file, written by a newer version, damaged (checksum, shapes, NaN weights).
    InputError
        The device is not available here.
    """
    state = read_torch_file(path, "geogpvae model file")
    if not isinstance(state, dict) or state.get("format") != SAVE_FORMAT:
        raise UnreadableFileError(
            f"{path} is not a geogpvae imputer file (format tag missing or different); "
            "models are written by GPVAEImputer.save or 'geogpvae impute --save-model'"
        )
    try:
        version = format_version(state)
    except ValueError as err:
        raise UnreadableFileError(f"{path} is a damaged geogpvae model file: {err}") from None
    if version > SAVE_VERSION:
        raise UnreadableFileError(
            f"{path} was written by a newer geogpvae ({state.get('package_version')}); "
            "upgrade to load it"
        )
    _check_load_device(path, state, device)
    try:
        return _imputer_from_state(state, device=device, progress=progress)
    except InputError:
        raise
    except (KeyError, TypeError, AttributeError, IndexError, RuntimeError, ValueError) as err:
        what = f"missing entry {err}" if isinstance(err, KeyError) else (
            one_line(err)[:300] if isinstance(err, ValueError) else type(err).__name__)
        raise UnreadableFileError(
            f"{path} is a damaged or incompatible geogpvae model file ({what}); "
            "save the model again"
        ) from None


def _imputer_from_state(
    state: dict[str, Any], *, device: str | None, progress: bool | str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    settings, fitted = state["settings"], state["fitted"]
    show = settings["progress"] if progress is None else progress
    check_weight_shapes(state["engine"], state["engine"]["weights"], build_model)
    engine = GPVAEEngine.from_state_dict(state["engine"], device=device, progress=show)
    cfg = engine.config  # every engine option, as trained (the settings' "options" repeat them)
    arguments = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    arguments.update(coords=settings["coords"], mask=settings["mask"], transforms=unplain(settings["transform"]),
                     coord_scale=settings["coord_scale"], progress=show)
    attrs = {n: unplain(a) for n, a in fitted["attrs"].items()}
    if not fitted.get("bounds_in_values"):  # older files: valid_* may be packed codes; not applied
        attrs = {n: {k: v for k, v in a.items() if not k.startswith("valid_")} for n, a in attrs.items()}
    return arguments, {
        "config_": cfg, "engine_": engine, "vars_": list(fitted["vars"]), "dims_": tuple(fitted["dims"]),
        "geometry_": Geometry.from_dict(fitted["geometry"]), "_transforms": dict(fitted["transforms"]),
        "_attrs": attrs, "_dtypes": dict(fitted["dtypes"]), "_fingerprint": fitted["fingerprint"],
    }


def _check_load_device(path: Any, state: Mapping[str, Any], device: str | None) -> None:
    """Refuse, before building anything, a device that does not exist or is not available."""
    if device is not None:
        GPVAEConfig(device=device)  # raises ValueError for an unknown device
    try:
        wanted = device or state["engine"]["config"].get("device", "auto")
    except (KeyError, TypeError, AttributeError):
        return  # a damaged state: reported when it is read
    try:
        resolve_device(wanted)
    except (RuntimeError, ValueError):
        raise InputError(
            f"{path}: device {wanted!r} is not available here; load it with device='cpu' "
            "(or 'auto')"
        ) from None
