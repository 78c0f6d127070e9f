"""Estimated against measured peak memory (and time) of a fit, its calibration and its prediction.

    python benchmarks/memory_estimate.py            # H in {10, 50, 200, 500}, N from 10^3 to 10^6
    python benchmarks/memory_estimate.py --quick    # H in {10, 50, 200}, N up to 10^4
    python benchmarks/memory_estimate.py --max-seconds 1000   # also N = 10^6 at H = 10 (slow)

Each case fits a synthetic field (:func:`geogpvae.datasets.synthetic.make_field`, 3 variables,
half of the values missing, N random points in the unit square) with one epoch and the other
defaults, then predicts the training field, in a child process, one case at a time. The child
resets its peak resident memory after drawing the field (``/proc/self/clear_refs``) and reports
``VmHWM``: the peak of the fit, the calibration and the prediction, with the interpreter and the
field held. Cases whose estimate exceeds ``--limit-gib`` or whose estimated time exceeds
``--max-seconds`` are listed and skipped. The estimate is
:func:`geogpvae.engine.resources.estimate_peak_memory`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

FULL_H, FULL_N = (10, 50, 200, 500), (1_000, 10_000, 100_000, 1_000_000)
QUICK_H, QUICK_N = (10, 50, 200), (1_000, 10_000)
#: the 600-site survey of issue 48 (measured there: 2.1 GB at H = 200, 11.1 GB at H = 500)
EXTRA = ((600, 200), (600, 500))


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"{key}:\s+(\d+)", f.read()).group(1)) * 1024


def child(n: int, h: int, engine: str, threads: int) -> None:
    """Fit and predict one case; print its peak resident bytes and seconds as JSON."""
    import warnings

    import numpy as np

    from geogpvae.datasets.synthetic import make_field
    from geogpvae.engine.core import GPVAEEngine

    field = make_field(np.random.default_rng(1).random((n, 2)), n_vars=3, missing=0.5, rng=0)
    x, values = field.points, field.values
    del field
    try:  # the peak from here on: the field's drawing left out
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    engine_ = GPVAEEngine(epochs=1, neighbours=h, engine=engine, threads=threads, progress=False).fit(x, values)
    engine_.predict()
    print(json.dumps({"peak": _status("VmHWM"), "seconds": time.perf_counter() - start}))


def _machine() -> str:
    import torch

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = platform.processor() or platform.machine()
    return (f"machine: {cpu}, {os.cpu_count()} CPU cores, {mem:.0f} GiB memory, {platform.system()}; "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def _measure(n: int, h: int, engine: str, threads: int, timeout: float) -> dict | None:
    cmd = [sys.executable, __file__, "--child", str(n), str(h), "--engine", engine, "--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return None
    if res.returncode != 0:
        print(res.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="H in {10, 50, 200}, N up to 10^4")
    p.add_argument("--engine", default="spa", choices=("spa", "hpa"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--limit-gib", type=float, default=8.0, help="skip cases estimated above this")
    p.add_argument("--max-seconds", type=float, default=240.0,
                   help="skip cases estimated to take longer (N = 10^6 at H = 10: --max-seconds 1000)")
    p.add_argument("--child", nargs=2, type=int, metavar=("N", "H"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*args.child, args.engine, args.threads)
        return
    from geogpvae.engine.config import GPVAEConfig
    from geogpvae.engine.resources import estimate_peak_memory, estimate_seconds, format_bytes

    print(_machine())
    print(f"engine {args.engine}, 3 variables, 2-D random points, epochs=1, {args.threads} threads, one case at a time")
    cases = [(n, h) for h in (QUICK_H if args.quick else FULL_H) for n in (QUICK_N if args.quick else FULL_N)]
    cases += [] if args.quick else [c for c in EXTRA if c not in cases]
    print(f"{'H':>4} {'N':>9} {'batch':>6} {'estimate':>10} {'measured':>10} {'ratio':>6} {'est. s':>7} {'s':>7}")
    ratios, start = [], time.perf_counter()
    for n, h in sorted(cases, key=lambda c: (c[1], c[0])):
        cfg = GPVAEConfig(engine=args.engine, neighbours=h, epochs=1, threads=args.threads)
        est, secs = estimate_peak_memory(cfg, n, 3, 2), estimate_seconds(cfg, n, 3, 2, cores=args.threads)
        row = f"{h:>4} {n:>9,} {cfg.batch_for(n):>6} {format_bytes(est):>10}"
        if est > args.limit_gib * 2**30 or secs > args.max_seconds:
            why = f"over {args.limit_gib:g} GiB" if est > args.limit_gib * 2**30 else f"over {args.max_seconds:g} s"
            print(f"{row} {'skipped: estimate ' + why:>25} {secs:>7.0f}")
            continue
        got = _measure(n, h, args.engine, args.threads, timeout=max(600.0, 4 * secs))
        if got is None:
            print(f"{row} {'failed or timed out':>25} {secs:>7.0f}")
            continue
        ratios.append(est / got["peak"])
        print(f"{row} {format_bytes(got['peak']):>10} {ratios[-1]:>6.2f} {secs:>7.0f} {got['seconds']:>7.0f}",
              flush=True)
    if ratios:
        print(f"estimate / measured: {min(ratios):.2f} to {max(ratios):.2f} over {len(ratios)} cases "
              f"(target: within 1/1.5 to 1.5); {time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
