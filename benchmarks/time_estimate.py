"""`geogpvae info`'s time estimate against the measured time of the default run, idle and busy.

    python benchmarks/time_estimate.py             # three fields, idle, then beside a busy process
    python benchmarks/time_estimate.py --no-load   # idle only
    python benchmarks/time_estimate.py --held-out  # only the runs held out of the constants' fit

Each case is a synthetic three-variable field with half of its values hidden (a 359-site survey,
a 48 x 48 grid, a 100 x 100 grid, which the estimate's constants were fitted to; a 1000-site survey
and a 64 x 64 grid held out), imputed with the package defaults in a child process. The
estimate is what ``geogpvae info`` prints: :func:`geogpvae.engine.resources.estimate_seconds`
scaled by :func:`geogpvae.engine.resources.speed_check`, run just before, in the same conditions.
With ``--load``, a second process keeps one core busy (a pure-Python loop) during both.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import time

#: the runs the estimate's constants were fitted to, then runs held out of the fit
CASES = {"survey 359 sites": {"n_points": 359}, "grid 48 x 48": {"shape": (48, 48)},
         "grid 100 x 100": {"shape": (100, 100)},
         "survey 1000 sites": {"n_points": 1000, "held_out": True}, "grid 64 x 64": {"shape": (64, 64), "held_out": True}}


def child(name: str, threads: int | None) -> None:
    """Estimate, then impute one case; print both as JSON. ``threads``: None for the default's choice."""
    import geogpvae
    from geogpvae.datasets import make_gaussian_field
    from geogpvae.engine.config import GPVAEConfig
    from geogpvae.engine.resources import estimate_seconds, fit_speed

    kwargs = CASES[name]
    shape = kwargs.get("shape")
    ds = make_gaussian_field(shape, n_vars=3, seed=0) if shape else make_gaussian_field(n_points=kwargs["n_points"],
                                                                                         n_vars=3, seed=0)
    n = int(ds.v0.size)
    config = GPVAEConfig(threads=threads)
    speed = fit_speed(config)  # as geogpvae info does
    estimate = estimate_seconds(config, n, 3, 2, speed=speed)
    start = time.perf_counter()
    geogpvae.impute(ds, threads=threads, progress=False)
    print(json.dumps({"estimate": estimate, "speed": speed, "seconds": time.perf_counter() - start}))


def _busy(stop) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1_000_003


def _run(name: str, threads: int | None) -> dict:
    extra = [] if threads is None else ["--threads", str(threads)]
    out = subprocess.run([sys.executable, __file__, "--child", name, *extra],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--threads", type=int, help="default: the package's choice (fewer on a busy machine)")
    parser.add_argument("--no-load", action="store_true", help="idle runs only")
    parser.add_argument("--held-out", action="store_true", help="only the runs held out of the constants' fit")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.threads)
        return
    import platform

    import torch
    from _machine import reference_line

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"machine: {platform.processor() or platform.machine()}, {multiprocessing.cpu_count()} cores, "
          f"torch {torch.__version__}, threads: {args.threads or 'the default choice'}")
    print(reference_line())
    print(f"{'case':<18} {'load':<10} {'speed':>6} {'estimate s':>11} {'measured s':>11} {'ratio':>6}")
    for load in ([False] if args.no_load else [False, True]):
        stop = multiprocessing.Event()
        busy = multiprocessing.Process(target=_busy, args=(stop,)) if load else None
        if busy:
            busy.start()
        try:
            for name in [c for c in CASES if CASES[c].get("held_out") or not args.held_out]:
                got = _run(name, args.threads)
                print(f"{name:<18} {'one core' if load else 'idle':<10} {got['speed']:>6.2f} {got['estimate']:>11.1f} "
                      f"{got['seconds']:>11.1f} {got['estimate'] / got['seconds']:>6.2f}", flush=True)
        finally:
            if busy:
                stop.set()
                busy.join()


if __name__ == "__main__":
    main()
