"""The package's exception and warning types (standard library only: every layer raises them)."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = [
    "CoordinateWarning",
    "InputError",
    "NetCDFReadError",
    "NotFittedError",
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
    """A file cannot be read as NetCDF (truncated, damaged, not NetCDF); an OSError and a ValueError."""


class NotFittedError(RuntimeError, AttributeError):
    """A method that needs a trained model was called before ``fit``; ``hasattr`` reads it as absent."""


class CoordinateWarning(UserWarning):
    """A coordinate was chosen or replaced in a way the user may not expect."""


class TrainingWarning(UserWarning):
    """Training settings that are likely to leave the model unfinished."""


def one_line(err: BaseException) -> str:
    """An exception's message on one line (its type name when it has none)."""
    return " ".join(str(err).split()) or type(err).__name__


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn with ``message`` of ``category``, attributed to the first caller outside geogpvae."""
    frame, level = sys._getframe(0), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE + os.sep
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
