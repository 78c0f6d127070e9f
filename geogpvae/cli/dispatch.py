"""Entry point of the ``geogpvae`` command: parse, run the command, map errors to exit codes."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Sequence

from .common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    JobFailure,
    UsageError,
    _bad_input_types,
    _one_line,
    _plain_warnings,
)
from .parser import build_parser

__all__ = ["main"]


def _jobs():
    """:mod:`geogpvae.cli.jobs` when a command has loaded it (it imports torch), else None."""
    return sys.modules.get(f"{__package__}.jobs")


def _rank() -> int:
    """This process's rank in a torchrun/srun launch (0 when alone or unknown)."""
    jobs = _jobs()
    if jobs is None:  # nothing started yet: read the launcher's variables without torch
        for key in ("RANK", "SLURM_PROCID"):
            value = os.environ.get(key, "")
            if value.isdigit():
                return int(value)
        return 0
    launch_environment = jobs.launch_environment
    try:
        launch = launch_environment()
    except ValueError:
        return 0
    return 0 if launch is None else launch.rank


def _report(err: BaseException, debug: bool, prefix: str | None = "error") -> None:
    if debug:
        traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
    rank = _rank()
    name = f"{PROG} (rank {rank})" if rank else PROG
    lead = f"{name}: {prefix}: " if prefix else f"{name}: "
    print(f"{lead}{_one_line(err)}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``geogpvae`` command on ``argv`` (default ``sys.argv[1:]``, without the program name).

    Returns
    -------
    int
        The exit code: 0 success, 1 failure, 2 bad usage or input, 128 + N stopped by signal N.
        A process that started a torchrun/srun process group exits instead
        (:func:`geogpvae.cli.jobs.exit_after_group`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    with _plain_warnings():
        code = _dispatch(argv, debug)
    jobs = _jobs()
    if jobs is not None:
        jobs.exit_after_group(code)  # a process of a torchrun/srun launch ends here
    return code


def _dispatch(argv: list[str], debug: bool) -> int:
    # the commands import torch after the command line is checked, so a bad one fails at once
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError(
                f"choose a command: impute, simulate, info, validate, predict, plot or demo (see '{PROG} --help')"
            )
        return args.handler(args, argv)
    except BrokenPipeError:  # the reader stopped early (geogpvae info ... | head): not an error
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except SystemExit as exc:  # --help, --version
        return (
            exc.code
            if isinstance(exc.code, int)
            else (EXIT_OK if exc.code is None else EXIT_FAILURE)
        )
    except Exception as exc:  # noqa: BLE001 - sorted below
        return _failure(exc, debug)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    finally:
        jobs = _jobs()
        if jobs is not None:
            jobs.flush_streams()


#: 128 + SIGPIPE, as a Unix tool killed by the signal would exit, without a message
EXIT_BROKEN_PIPE = 141


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing more."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _failure(exc: BaseException, debug: bool) -> int:
    """Report a command's failure; returns the exit code."""
    jobs = _jobs()
    if jobs is not None and isinstance(exc, jobs.JobInterrupted):
        if _rank() == 0:
            _report(exc, debug, prefix=None)
        return exc.exit_code
    if isinstance(exc, _bad_input_types()):
        _report(exc, debug)
        return EXIT_USAGE
    if not debug:
        kind = "" if isinstance(exc, JobFailure) else f"{type(exc).__name__}: "  # its message is for users
        print(
            f"{PROG}: error: {kind}{_one_line(exc)} (run with --debug for the traceback)",
            file=sys.stderr,
            flush=True,
        )
    else:
        _report(exc, debug)
    return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
