"""The package's exception and warning types, and how its warnings name the caller.

This module imports nothing from the package (and nothing beyond the standard library), so
every layer, from the xarray boundary to the torch engine, can raise the same errors.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = [
    "CoordinateWarning",
    "InputError",
    "NetCDFReadError",
    "TrainingWarning",
    "UnreadableFileError",
    "warn_caller",
]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


class InputError(ValueError):
    """Input that the package cannot work with; the message says what to do."""


class UnreadableFileError(ValueError):
    """A file exists but cannot be read as what it should be (model, checkpoint)."""


class NetCDFReadError(OSError, ValueError):
    """A file cannot be read as NetCDF (bad input: truncated, damaged, not NetCDF).

    An :class:`OSError` (what the NetCDF libraries raise) and a :class:`ValueError` (bad
    input), so code catching either keeps working.
    """


class CoordinateWarning(UserWarning):
    """A coordinate was chosen or replaced in a way the user may not expect."""


class TrainingWarning(UserWarning):
    """Training settings that are likely to leave the model unfinished."""


def one_line(err: BaseException) -> str:
    """An exception's message on one line (its type name when it has none), for messages
    that wrap another error."""
    return " ".join(str(err).split()) or type(err).__name__


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn, attributing the warning to the first caller outside geogpvae.

    Parameters
    ----------
    message : str
        The warning text.
    category : type of Warning, default UserWarning
        The warning class.
    """
    frame, level = sys._getframe(0), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE + os.sep
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
