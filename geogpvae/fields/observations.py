"""Whether the values stacked from a Dataset can be taken as observations (else what to do)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from ..errors import InputError, warn_caller
from .valid import attr_numbers, undecoded_fills, valid_bounds

__all__: list[str] = []


def _undecoded_fills(name: str, var: xr.DataArray, col: np.ndarray) -> np.ndarray:
    """``col`` with NaN where it holds a fill value xarray left undecoded, with a warning."""
    hits = undecoded_fills(var, col)
    if not hits.any():
        return col
    warn_caller(
        f"{name}: {int(hits.sum())} values equal its fill value {col[hits][0]:g} in {var.dtype}, which "
        "xarray left undecoded (the attribute is another float type): taken as missing, as CF says"
    )
    return np.where(hits, np.nan, col)


_DECODE_HINT = (
    "the Dataset looks undecoded (opened with mask_and_scale=False or decode_cf=False?): "
    "open it with xarray's default decoding (mask_and_scale=True) or decode it with "
    "xr.decode_cf(ds)"
)


def _check_decoded(name: str, var: xr.DataArray, col: np.ndarray) -> None:
    """Refuse values that CF attributes mark as packed, missing or invalid (an undecoded Dataset)."""
    attrs = var.attrs
    for key in ("scale_factor", "add_offset"):
        if key in attrs:
            raise InputError(
                f"variable {name!r} is still packed ({key} = {attrs[key]!r} in its attributes, "
                f"so its numbers are not in their real units); {_DECODE_HINT}"
            )
    for key in ("_FillValue", "missing_value"):
        if key not in attrs:
            continue
        fills = attr_numbers(attrs[key])
        hits = np.isin(col, fills[~np.isnan(fills)])
        if hits.any():
            fill = fills[~np.isnan(fills)][0]
            raise InputError(
                f"variable {name!r} holds its {key} {fill:g} at {int(hits.sum())} cells, which "
                f"would be taken as observed values; {_DECODE_HINT}, or set them to NaN: "
                f"ds[{name!r}] = ds[{name!r}].where(ds[{name!r}] != {fill:g})"
            )
    low, high = valid_bounds(var.attrs, var.encoding)
    if low is None and high is None:
        return
    observed = col[~np.isnan(col)]
    bad = np.zeros(observed.shape, dtype=bool)
    if low is not None:
        bad |= observed < low
    if high is not None:
        bad |= observed > high
    if bad.any():
        raise InputError(
            f"variable {name!r} has {int(bad.sum())} values outside its valid range "
            f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}] "
            "(CF: such values are missing, but xarray does not mask them): set them to NaN "
            f"with ds[{name!r}].where(...), or remove the valid_range/valid_min/valid_max "
            "attribute if they are real values"
        )


def _check_values(
    values: np.ndarray, names: Sequence[str], transforms: Mapping[str, str | None], masked: bool,
    originals: Mapping[str, xr.DataArray] | None = None,
) -> None:
    where = " inside the mask" if masked else ""
    for j, name in enumerate(names):
        col = values[:, j]
        if originals is not None:
            _check_decoded(name, originals[name], col)
        if np.isinf(col).any():
            raise InputError(
                f"variable {name!r} has {int(np.isinf(col).sum())} infinite values{where}; "
                "replace them with NaN (missing) or finite values"
            )
        observed = ~np.isnan(col)
        if not observed.any():
            raise InputError(
                f"variable {name!r} has no observed value{where}: there is nothing to learn "
                "it from; leave it out of vars"
            )
        if transforms.get(name) == "log":
            bad = observed & (col <= 0)
            if bad.any():
                raise InputError(
                    f"cannot log-transform {name!r}: {int(bad.sum())} observed values{where} are "
                    f"<= 0 (minimum {col[observed].min():g}); use no transform for it, or shift it "
                    "to positive values"
                )
