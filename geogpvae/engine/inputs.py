"""Checks of the engine's inputs and their standardisation (NumPy only).

Every refusal is an :class:`~geogpvae.errors.InputError` that names the problem and the fix:
non-finite coordinates, complex or non-numeric values, values whose standardisation
overflows, and values far outside the training field's range.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = [
    "centre",
    "check_coordinates",
    "check_spread",
    "check_standardised",
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

    Raises
    ------
    InputError
        A variable whose statistics overflow (see :func:`check_spread`).
    """
    safe = np.where(observed & log, values, 1.0)
    mod = np.where(log, np.log(safe), values)
    k = values.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        loc = np.array([mod[observed[:, j], j].mean() for j in range(k)])
        sd = np.array([mod[observed[:, j], j].std() for j in range(k)])
    check_spread(mod, observed, loc, sd, names)
    return loc, np.where(sd > 0, sd, 1.0)


def check_spread(
    mod: np.ndarray, observed: np.ndarray, loc: np.ndarray, sd: np.ndarray, names: list[str]
) -> None:
    """Refuse variables whose standardisation overflows (values near or above 1e154)."""
    for j, name in enumerate(names):
        if np.isfinite(loc[j]) and np.isfinite(sd[j]):
            continue
        big = float(np.max(np.abs(mod[observed[:, j], j])))
        raise InputError(
            f"{name}: observed values as large as {big:.3g} overflow when standardised (their "
            "squares exceed the float64 range, about 1.8e308); express the variable in other "
            "units (e.g. divide it by a power of ten) or set the outlying values to NaN"
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
