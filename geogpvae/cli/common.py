"""Exit codes, the command's error types and how its messages reach the terminal."""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE"]


EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
PROG = "geogpvae"
_GLOB_CHARS = set("*?[")


class UsageError(ValueError):
    """Bad usage of the command (exit code 2)."""


class JobFailure(RuntimeError):
    """A failure during the run, after the input was accepted (exit code 1)."""


def _bad_input_types() -> tuple[type[BaseException], ...]:
    from ..errors import InputError

    return (
        UsageError,
        InputError,
        FileNotFoundError,
        FileExistsError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
        ValueError,
        TypeError,
        KeyError,
        ImportError,  # an optional package missing (zarr for a *.zarr store): the message says which
    )


#: The library's messages name its arguments; the command shows its own flags instead.
_CLI_WORDS = (
    (re.compile(r"transforms=\{'([^']+)': 'log'\}"), r"--log-vars \1"),
    (re.compile(r"transforms=\{'([^']+)': None\}"), r"--option transform.\1=none"),
    (re.compile(r"coords=\['x', 'y'\]"), "--coords x,y"),
    (re.compile(r"coords=\[([^\]]*)\] \(or make them coordinates, ds\.set_coords\(\[[^\]]*\]\)\)"),
     lambda m: "--coords " + ",".join(re.findall(r"'([^']*)'", m.group(1)))),
    (re.compile(r"coords=\[((?:'[^']*'(?:, )?)+)\](?! \(--coords)"),
     lambda m: "--coords " + ",".join(re.findall(r"'([^']*)'", m.group(1)))),
    (re.compile(r"make them coordinates, ds\.set_coords\(\[[^\]]*\]\)(?=; name the variables)"),
     "name them in --coords with the other coordinates"),
    (re.compile(r"leave coords=None"), "leave --coords out"),
    (re.compile(r"coords=\[\.\.\.\]"), "--coords"),
    (re.compile(r"vars=\[\.\.\.\]"), "--vars"),
    (re.compile(r"\bout of vars\b"), "out of --vars"),
    (re.compile(r"isel=\{([^}]*)\}"),
     lambda m: "--isel " + ",".join(re.sub(r"'(.*)': ", r"\1=", p.strip()) for p in m.group(1).split(","))),
    (re.compile(r"^isel: "), "--isel: "),
    (re.compile(r"\buse gaps='random'"), "use --gaps random"),
    (re.compile(r"\braise share\b"), "raise --share"),
    (re.compile(r"\(mask=\)"), "(--mask-var)"),
    (re.compile(r"^epochs=(\d+) is under"), r"--epochs \1 is under"),
    (re.compile(r"leave epochs unset \(None\)"), "leave --epochs out"),
    (re.compile(r"make it NaN, e\.g\. ds\[.*?\]\.where\(.*?\), or give the variable a "
                r"_FillValue or missing_value attribute in its file"),
     "give the variable a _FillValue or missing_value attribute in the file (e.g. with ncatted)"),
)


def cli_words(text: str) -> str:
    """``text`` on one line, with the library's argument names replaced by the command's flags."""
    text = " ".join(str(text).split())
    for pattern, flag in _CLI_WORDS:
        text = pattern.sub(flag, text)
    return text


def _one_line(err: BaseException) -> str:
    text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
    return cli_words(text) or type(err).__name__


class Reporter:
    """One-line messages on stderr, from the main process only, unless quiet."""

    def __init__(self, quiet: bool = False, active: bool = True) -> None:
        self.quiet, self.active = quiet, active

    def __call__(self, message: str) -> None:
        if self.active and not self.quiet:
            print(f"{PROG}: {message}", file=sys.stderr, flush=True)


@contextmanager
def _plain_warnings() -> Iterator[None]:
    """Show warnings as one line ``geogpvae: warning: ...``."""

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{PROG}: warning: {cli_words(str(message))}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def _progress(mode: str) -> bool | str:
    return True if mode == "auto" else mode


def _check_device(device: str) -> None:
    import torch

    try:
        dev = torch.device("cuda" if device == "auto" else device)
    except (RuntimeError, ValueError):
        raise UsageError(
            f"--device {device!r} is not a device: use auto, cpu, cuda or cuda:N"
        ) from None
    if device != "auto" and dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: CUDA is not available here; use --device auto or cpu")


def drawn_lazily(ds: Any) -> Any:
    """``ds`` dask-backed where dask is installed, so that realisations drawn from it are written a
    few at a time (:meth:`GPVAEImputer.simulate`); else ``ds`` (all drawn, then written)."""
    import importlib.util

    return ds.chunk() if importlib.util.find_spec("dask") is not None else ds
