"""Full-resolution SPE10 model 2 through the command line, end to end (issue 9, item 3).

Protocol: all 60 x 220 x 85 = 1,122,000 cells of SPE10 model 2, channels porosity, log kx,
log ky, log kz (as in the paper task, but at full resolution); every value dropped
independently with probability 0.5 (``--mask-seed``); the field is written to a NetCDF file
and imputed by ``geogpvae impute`` in a child process, package defaults unless options are
given; every dropped value is scored against the truth in the same two unit systems as
``benchmarks/spe10.py``.

Reported: wall seconds of the command (with the time of each of its log lines, so the stages
can be read off), peak resident memory of the command (``getrusage(RUSAGE_CHILDREN)``), the
size and layout of the output file, RMSE / NLL / 95 % coverage. With ``--realizations N``,
``geogpvae simulate -n N`` instead: the same wall time and memory, the observed values checked
bit for bit in every realisation, and per channel the RMSE of the realisations' mean and their
mean CRPS over the dropped values (standardised units).

    OMP_NUM_THREADS=2 python benchmarks/spe10_full.py --workdir /tmp/spe10full
    python benchmarks/spe10_full.py --downsample 2 --workdir /tmp/spe10half   # 141,900 cells
    python benchmarks/spe10_full.py --cli-args "--engine hpa"
    OMP_NUM_THREADS=2 python benchmarks/spe10_full.py --realizations 20 --workdir /tmp/spe10full

Needs the SPE10 files (GEOGPVAE_DATA_DIR) and the ``netcdf`` support of the core install.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr

from geogpvae.datasets import load_spe10

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spe10 import observed_scale, paper_scale, score

NAMES = ["porosity", "log_kx", "log_ky", "log_kz"]


def make_input(downsample: int, mask_seed: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Write the masked field to ``path``; return the truth (z, y, x, C) and the keep-mask."""
    ds = load_spe10(downsample=downsample)
    truth = np.stack([ds.porosity.values, np.log(ds.kx.values), np.log(ds.ky.values), np.log(ds.kz.values)], -1)
    keep = np.random.default_rng(mask_seed).random(truth.shape) >= 0.5
    work = xr.Dataset(coords={c: ds[c] for c in ("z", "y", "x")})
    for c, name in enumerate(NAMES):
        work[name] = (("z", "y", "x"), np.where(keep[..., c], truth[..., c], np.nan).astype(np.float32))
        work[name].attrs["long_name"] = name.replace("log_", "natural log of ")
    encoding = {n: {"zlib": True, "complevel": 1} for n in NAMES}
    work.to_netcdf(path, encoding=encoding)
    return truth, keep


def run_cli(inp: Path, out: Path, cli_args: str, threads: int, realizations: int | None = None
            ) -> tuple[float, list[tuple[float, str]], int]:
    """Run ``geogpvae impute`` (``simulate -n`` with ``realizations``); return wall seconds, its
    timestamped output lines, exit status."""
    command = ["impute"] if realizations is None else ["simulate", "-n", str(realizations)]
    cmd = [sys.executable, "-m", "geogpvae", *command, str(inp), str(out), "--vars", ",".join(NAMES),
           "--progress", "log", "--overwrite", *shlex.split(cli_args)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    print("$", " ".join(cmd[2:]), flush=True)
    t0 = time.perf_counter()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            stamp = time.perf_counter() - t0
            lines.append((stamp, line.rstrip()))
            print(f"  [{stamp:7.1f} s] {line.rstrip()}", flush=True)
        status = proc.wait()
    return time.perf_counter() - t0, lines, status


def read_output(out: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    with xr.open_dataset(out) as res:
        mean = np.stack([res[n].transpose("z", "y", "x").values for n in NAMES], -1)
        std = np.stack([res[f"{n}_std"].transpose("z", "y", "x").values for n in NAMES], -1)
        layout = {n: dict(chunks=res[n].encoding.get("chunksizes"), zlib=res[n].encoding.get("zlib"))
                  for n in NAMES[:1]}
    layout["bytes"] = out.stat().st_size
    return mean, std, layout


def score_realisations(out: Path, truth: np.ndarray, keep: np.ndarray) -> None:
    """Print, per channel: observed values exact in every realisation, RMSE of the ensemble mean
    and the ensemble's CRPS over the dropped values, in units of the observed values' sd."""
    with xr.open_dataset(out) as res:
        print(f"output: {out.stat().st_size / 2**20:.0f} MiB, {res.sizes['realization']} realisations, "
              f"chunks {res[NAMES[0]].encoding.get('chunksizes')}")
        for c, name in enumerate(NAMES):
            draws = res[name].transpose("realization", "z", "y", "x").values.astype(np.float64)
            seen, gap = keep[..., c], ~keep[..., c]
            exact = all(np.array_equal(d[seen], truth[..., c][seen].astype(np.float32)) for d in draws)
            sd = truth[..., c][seen].std()
            sample, target = draws[:, gap] / sd, truth[..., c][gap] / sd
            rmse = float(np.sqrt(np.mean((sample.mean(0) - target) ** 2)))
            m = len(sample)  # the ensemble CRPS: E|X - y| - E|X - X'| / 2, over every pair of draws
            pairs = sum(np.abs(sample[i] - sample[k]) for i in range(m) for k in range(i + 1, m)) if m > 1 else 0.0
            crps = float(np.mean(np.mean(np.abs(sample - target), 0) - pairs / m**2))
            print(f"{name:9s}: observed exact {exact}, RMSE of the mean {rmse:.3f}, CRPS {crps:.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--downsample", type=int, default=1, help="1: the full 1,122,000 cells")
    p.add_argument("--mask-seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    p.add_argument("--workdir", type=Path, default=Path("spe10_full_work"))
    p.add_argument("--cli-args", default="", help="extra arguments of geogpvae impute, e.g. '--engine hpa'")
    p.add_argument("--realizations", type=int, default=None, help="geogpvae simulate -n N instead of impute")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args()

    args.workdir.mkdir(parents=True, exist_ok=True)
    inp, out = args.workdir / "spe10_in.nc", args.workdir / "spe10_out.nc"
    t = time.perf_counter()
    truth, keep = make_input(args.downsample, args.mask_seed, inp)
    print(f"SPE10 model 2, every {args.downsample}. cell: {truth.shape[:3]} = {np.prod(truth.shape[:3]):,} cells "
          f"x {len(NAMES)} channels, {(~keep).sum():,} values dropped; input written in "
          f"{time.perf_counter() - t:.1f} s ({inp.stat().st_size / 2**20:.0f} MiB)")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{args.threads} threads for the command, no GPU used unless --cli-args says so")
    wall, lines, status = run_cli(inp, out, args.cli_args, args.threads, args.realizations)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    command = "impute" if args.realizations is None else f"simulate -n {args.realizations}"
    print(f"\ngeogpvae {command}: exit {status}, {wall:.1f} s wall, peak RSS {peak:.0f} MiB")
    if status != 0:
        sys.exit(status)
    if args.realizations is not None:
        score_realisations(out, truth, keep)
        return
    mean, std, layout = read_output(out)
    scales = {"standardised": observed_scale(truth, keep), "paper units": paper_scale(truth, keep)}
    res = score("GPVAE (CLI, package defaults)", mean, std, truth, keep, scales, seconds=wall,
                extra={"peak_rss_mib": peak, "output": layout, "cli_args": args.cli_args})
    for label in ("paper units", "standardised"):
        r = res[label]
        per = " ".join(f"{NAMES[c]} {r['per_channel'][c]['rmse']:.3f}/{r['per_channel'][c]['cov95']:.3f}"
                       for c in r["per_channel"])
        print(f"{label:13s}: RMSE {r['rmse']:.3f}  NLL {r['nll']:.3f}  cov95 {r['cov95']:.3f}  "
              f"(per channel RMSE/cov95: {per})")
    print(f"output: {layout['bytes'] / 2**20:.0f} MiB, chunks {layout[NAMES[0]]['chunks']}, "
          f"compressed {layout[NAMES[0]]['zlib']}")
    if args.json:
        res["log"] = lines
        Path(args.json).write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
