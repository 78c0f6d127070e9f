"""Progress of the long stages of a run: training epochs, calibration rounds, prediction.

One display for all of them (``progress=`` of the engine, ``--progress`` of the command line):
``"bar"``, a tqdm bar per stage; ``"log"``, plain lines on stderr every :data:`LOG_INTERVAL`
seconds, e.g. ``epoch 120/800 loss 0.8123 elapsed 00:12:03 eta 01:08:14``; ``"none"`` (or
``False``), nothing; ``True``, a bar on a terminal and log lines otherwise. The clock is read
through :data:`clock`, so that tests can replace it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

__all__ = ["LOG_INTERVAL", "Progress", "display_mode", "shown_here"]

#: seconds between two log lines of a running stage
LOG_INTERVAL = 10.0

#: the wall clock of the log lines (seconds); tests replace it with a fake one
clock: Callable[[], float] = time.monotonic


def display_mode(progress: bool | str | None) -> str:
    """``"bar"``, ``"log"`` or ``"none"`` for an engine's ``progress`` setting.

    Parameters
    ----------
    progress : bool, {"auto", "bar", "log", "none"} or None
        ``True`` and ``"auto"`` give a bar when stderr is a terminal and log lines
        otherwise; ``False`` and ``None`` give ``"none"``.

    Returns
    -------
    str
    """
    if progress is True or progress == "auto":
        return "bar" if sys.stderr.isatty() else "log"
    if progress in ("bar", "log", "none"):
        return str(progress)
    if not progress:
        return "none"
    raise ValueError(f"progress must be True, False, 'auto', 'bar', 'log' or 'none', got {progress!r}")


def shown_here(progress: bool | str | None) -> bool | str | None:
    """``progress`` in the process that reports (rank 0 of a distributed run), else False."""
    import torch

    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    return progress if not distributed or torch.distributed.get_rank() == 0 else False


def _hms(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """The progress of one stage of ``total`` units (epochs, rounds, locations).

    Parameters
    ----------
    mode : bool or str
        The display (see :func:`display_mode`).
    total : int
        Units in the stage.
    name : str
        What a unit is called in log lines: ``"epoch"`` gives ``epoch 3/10``; with
        ``unit``, ``"prediction"`` gives ``prediction 4096/20000 locations``.
    unit : str, optional
        The unit, after the counts in log lines and on the bar.
    initial : int
        Units already done (a resumed run); the time estimate counts from here.
    interval : float, optional
        Seconds between log lines (default :data:`LOG_INTERVAL`).
    then : int
        Units of the same cost that follow this stage (the epochs the chosen candidate trains
        after the β selection): lines then also estimate the end of both, e.g. ``eta 00:02:10
        (training 00:09:40)``.
    """

    def __init__(self, mode: bool | str | None, total: int, name: str, *, unit: str | None = None,
                 initial: int = 0, interval: float | None = None, then: int = 0) -> None:
        self.mode = display_mode(mode)
        self.total, self.name, self.unit, self.then = int(total), name, unit, max(int(then), 0)
        self.interval = LOG_INTERVAL if interval is None else float(interval)
        self.start = clock()
        self.last = -math.inf  # the first update is always shown
        self.first = self.done = int(initial)
        self.inside = False  # a line came from inside the unit in work
        self.bar = None
        if self.mode == "bar":
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, initial=self.done, desc=name, unit=unit or name,
                            dynamic_ncols=True)
        elif self.mode == "log" and unit is not None:  # a stage that is not training says it began
            self._line(self.done, "")

    def update(self, done: int, note: str = "") -> None:
        """``done`` units are complete; ``note`` (such as ``"loss 0.81"``) follows the counts."""
        step, self.done = done - self.done, done
        if self.bar is not None:
            self.bar.update(step)
            whole = self._whole(done, clock() - self.start)
            if note or whole:
                self.bar.set_postfix_str(f"{note}{whole}".strip())
        elif self.mode == "log":
            now = clock()
            # a unit long enough to be reported from inside also reports its end (its loss)
            if now - self.last >= self.interval or done >= self.total or self.inside:
                self._line(done, note, now)
            self.inside = False

    def within(self, part: float, note: str = "") -> None:
        """A share ``part`` (0 to 1) of the unit in work is done: a log line when one is due.

        Keeps a batch log alive through units that take minutes (a long epoch, a large chunk).
        """
        if self.mode != "log" or part >= 1:  # a complete unit is reported by update()
            return
        now = clock()
        if now - self.last >= self.interval:
            self._line(self.done + part, note, now)
            self.inside = True

    def _line(self, done: float, note: str, now: float | None = None) -> None:
        now = clock() if now is None else now
        self.last = now
        elapsed = now - self.start
        shown = f"{int(done)}/{self.total}"
        if self.unit is None and done != int(done):  # inside an epoch: the one in work
            shown = f"{int(done) + 1}/{self.total}"
        text = f"{self.name} {shown}" + (f" {self.unit}" if self.unit else "")
        eta = ""
        if done > self.first:
            eta = f" eta {_hms(elapsed / (done - self.first) * max(self.total - done, 0))}{self._whole(done, elapsed)}"
        note = f" {note}" if note else ""
        print(f"{text}{note} elapsed {_hms(elapsed)}{eta}", file=sys.stderr, flush=True)

    def _whole(self, done: float, elapsed: float) -> str:
        """`` (training hh:mm:ss)``: the time left in this stage and the ``then`` units after it."""
        if not self.then or done <= self.first:
            return ""
        return f" (training {_hms(elapsed / (done - self.first) * (max(self.total - done, 0) + self.then))})"

    def close(self) -> None:
        """End the bar (a no-op for log lines and none)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
