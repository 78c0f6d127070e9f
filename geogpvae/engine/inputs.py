"""Checks of the engine's inputs and their standardisation (NumPy only).

Every refusal is an :class:`~geogpvae.errors.InputError` that names the problem and the fix.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = [
    "centre",
    "check_coordinates",
    "check_spread",
    "check_standardised",
    "constant_values",
    "missing_code_warnings",
    "real_values",
    "standardisation",
]


def check_coordinates(x: np.ndarray, what: str = "coordinates") -> np.ndarray:
    """``x`` as float64, shape (N, D), every value finite; ``what`` names it in errors."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise InputError(f"{what} must have shape (N, D), got {x.shape}")
    bad = ~np.isfinite(x)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise InputError(
            f"coordinate {col} has {int(bad[:, col].sum())} NaN or infinite values (first at location {row}); "
            "every location needs finite coordinates: drop those locations or mask them out"
        )
    return x


def centre(x: np.ndarray) -> np.ndarray:
    """The middle of the coordinates' range per column, shape (D,), float64."""
    if x.shape[0] == 0:
        return np.zeros(x.shape[1])
    return (x.min(axis=0) + x.max(axis=0)) / 2.0


def real_values(values: np.ndarray, names: list[str] | None) -> np.ndarray:
    """``values`` as float64, refusing complex and other non-real numbers."""
    arr = np.asarray(values)
    if arr.dtype.kind == "c":
        raise InputError(
            "values are complex numbers; only real values can be imputed: impute the real and "
            "imaginary parts (or modulus and phase) as separate variables"
        )
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError(f"values must be real numbers, got dtype {arr.dtype}") from None
    return np.asarray(arr, dtype=np.float64)


def standardisation(
    values: np.ndarray, observed: np.ndarray, log: np.ndarray, names: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (1 where 0) of each variable's observed, transformed values.

    Computed on the values divided by their largest magnitude, so that squares neither under- nor overflow.

    Raises
    ------
    InputError
        A variable whose statistics overflow (see :func:`check_spread`).
    """
    safe = np.where(observed & log, values, 1.0)
    mod = np.where(log, np.log(safe), values)
    k = values.shape[1]
    loc, sd = np.empty(k), np.empty(k)
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(k):
            v = mod[observed[:, j], j]
            size = np.max(np.abs(v))
            unit = size if 0 < size < np.inf else 1.0
            loc[j], sd[j] = (v / unit).mean() * unit, (v / unit).std() * unit
    check_spread(mod, observed, loc, sd, names)
    return loc, np.where(sd > 0, sd, 1.0)


def constant_values(values: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Each variable's one observed value where all of them are equal, else NaN; shape (K,).

    Such a variable's gaps are filled with that value, standard deviation 0.
    """
    out = np.full(values.shape[1], np.nan)
    for j in range(values.shape[1]):
        v = values[observed[:, j], j]
        if v.size and np.all(v == v[0]):
            out[j] = v[0]
    return out


#: the largest magnitude of a variable's observed (transformed) values (float64 ends near 1.8e308)
MAX_MAGNITUDE = 1e300

#: the smallest ratio of median absolute deviation to standard deviation (float32 flattens the rest)
MIN_SPREAD_RATIO = 1e-7


def check_spread(
    mod: np.ndarray, observed: np.ndarray, loc: np.ndarray, sd: np.ndarray, names: list[str]
) -> None:
    """Refuse variables that overflow float64 or whose outliers would flatten the rest.

    Raises
    ------
    InputError
        Values beyond :data:`MAX_MAGNITUDE`, or a nonzero median absolute deviation below
        :data:`MIN_SPREAD_RATIO` times the standard deviation.
    """
    for j, name in enumerate(names):
        v = mod[observed[:, j], j]
        big = float(np.max(np.abs(v)))
        if not (np.isfinite(loc[j]) and np.isfinite(sd[j]) and big <= MAX_MAGNITUDE):
            raise InputError(
                f"{name}: observed values as large as {big:.3g} leave no room for predictions "
                "below the float64 limit (about 1.8e308); express the variable in other units "
                "(e.g. divide it by a power of ten) or set the outlying values to NaN"
            )
        unit = big if big > 0 else 1.0
        typical = float(np.median(np.abs(v / unit - np.median(v / unit)))) * unit
        if 0 < typical < MIN_SPREAD_RATIO * sd[j]:
            raise InputError(
                f"{name}: a few observed values as large as {big:.3g} dwarf the rest (their typical "
                f"spread is {typical:.3g}); the model's float32 arithmetic would flatten the others: "
                "set the outlying values to NaN, check their units, or model the variable in log "
                f"space (transforms={{{name!r}: 'log'}}) if it spans many orders of magnitude"
            )


def check_standardised(y: np.ndarray, names: list[str]) -> None:
    """Refuse standardised values too far out for the model's arithmetic (``abs(y) > 1e15``)."""
    with np.errstate(invalid="ignore"):
        far = ~(np.abs(y) <= 1e15)
    if far.any():
        j = int(np.argwhere(far)[0][1])
        raise InputError(
            f"{names[j]}: values lie more than 1e15 standard deviations from the training "
            "values (different units?); convert them to the units of the training field"
        )


#: Magnitudes files use to mark a missing value (999 ... 999999999, ends of 16- and 32-bit integers)
MISSING_CODES = frozenset([10.0**k - 1 for k in range(3, 10)] + [32767.0, 32768.0, 65535.0,
                                                                    2147483647.0, 2147483648.0])

def missing_code_warnings(values: np.ndarray, observed: np.ndarray, names: list[str]) -> list[str]:
    """Texts of warnings about values that look like a missing-value code taken for data.

    A code (:data:`MISSING_CODES`, either sign) beyond the other values by more than their range.

    Parameters
    ----------
    values : ndarray of float64, shape (N, K)
        The variables' values in their own units.
    observed : ndarray of bool, shape (N, K)
    names : list of str, length K

    Returns
    -------
    list of str
        One text per variable with such codes, naming every one of them.
    """
    out = []
    for j, name in enumerate(names):
        v = values[observed[:, j], j]
        is_code = np.isin(np.abs(v), list(MISSING_CODES))
        rest = v[~is_code]
        if rest.size < 2:
            continue
        low, high, spread = rest.min(), rest.max(), np.ptp(rest)
        found = [c for c in np.unique(v[is_code]) if min(abs(c - low), abs(c - high)) > spread]
        if found:
            codes = ", ".join(f"{c:g} ({int((v == c).sum())} values)" for c in found)
            out.append(f"{name}: {codes} far outside the other values ({low:g} to {high:g}): if "
                       f"{found[0]:g} marks a missing value, make it NaN, e.g. "
                       f"ds[{name!r}] = ds[{name!r}].where(ds[{name!r}] != {found[0]:g}), or give "
                       "the variable a _FillValue or missing_value attribute in its file")
    return out
