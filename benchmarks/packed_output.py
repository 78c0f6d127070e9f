"""How large an imputed ERA5-style file is, with the input's int16 packing kept or dropped.

Makes a reanalysis-like field (2 m temperature on a 0.25-degree grid over Europe, ten days of
daily maps by default, in K), writes it the way ERA5 does (int16 codes, ``scale_factor`` from
the field's range, ``add_offset`` at its middle), hides a share of the values (random gaps
plus a cloud-like patch per day), imputes it with ``geogpvae.impute`` and writes the result
with :func:`geogpvae.to_netcdf` twice: as geogpvae now writes it (the packing kept, see
:mod:`geogpvae.fields.packing`) and with the packing dropped (float64 ``v``, as before).
Prints the bytes on disk of the input and both outputs, the seconds of each write, whether
the observed values came back bit for bit, and the largest rounding of a fill against its
std. Both outputs are compressed the same way (zlib level 4, shuffle).

    python benchmarks/packed_output.py                      # 10 x 81 x 161 cells
    python benchmarks/packed_output.py --days 5 --epochs 20 # a quick look
"""

from __future__ import annotations

import os
import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import geogpvae


def era5_like(days: int, seed: int = 0) -> xr.Dataset:
    """A smooth temperature field with weather-like anomalies, in K, on (time, lat, lon)."""
    rng = np.random.default_rng(seed)
    lat = np.arange(70.0, 49.75, -0.25)
    lon = np.arange(-10.0, 30.25, 0.25)
    t = np.arange(days)
    base = 288.0 - 0.6 * (lat[:, None] - 50.0) + 2.0 * np.sin(np.radians(3 * lon))[None, :]
    field = np.empty((days, lat.size, lon.size))
    for d in t:
        waves = sum(
            rng.normal(0, 2.0) * np.sin(np.radians(k * lon + rng.uniform(0, 360)))[None, :]
            * np.cos(np.radians(k * (lat[:, None] - 50.0) + rng.uniform(0, 360)))
            for k in (4, 7, 11)
        )
        field[d] = base + waves + rng.normal(0, 0.2, base.shape)
    time_axis = np.datetime64("2021-01-01") + t.astype("timedelta64[D]")
    return xr.Dataset(
        {"t2m": (("time", "latitude", "longitude"), field, {"units": "K", "long_name": "2 metre temperature"})},
        coords={"time": time_axis,
                "latitude": ("latitude", lat, {"units": "degrees_north"}),
                "longitude": ("longitude", lon, {"units": "degrees_east"})},
    )


def hide(ds: xr.Dataset, share: float, seed: int = 1) -> xr.Dataset:
    """Random gaps plus one 12 x 20-cell patch per day."""
    rng = np.random.default_rng(seed)
    values = ds.t2m.values.copy()
    values[rng.random(values.shape) < share] = np.nan
    for d in range(values.shape[0]):
        i, j = rng.integers(0, values.shape[1] - 12), rng.integers(0, values.shape[2] - 20)
        values[d, i:i + 12, j:j + 20] = np.nan
    return ds.assign(t2m=ds.t2m.copy(data=values))


def write_packed_input(ds: xr.Dataset, path: Path) -> None:
    """int16 codes as ERA5 packs them: the field's range over 2**16 - 2 steps."""
    low, high = float(ds.t2m.min()), float(ds.t2m.max())
    scale = (high - low) / (2**16 - 2)
    encoding = {"t2m": {"dtype": "int16", "scale_factor": scale, "add_offset": (high + low) / 2,
                        "_FillValue": np.int16(-32767), "missing_value": np.int16(-32767),
                        "zlib": True, "complevel": 4}}
    ds.to_netcdf(path, encoding=encoding)


def timed_write(ds: xr.Dataset, path: Path) -> float:
    start = time.perf_counter()
    geogpvae.to_netcdf(ds, path)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=int, default=10)
    p.add_argument("--share", type=float, default=0.1, help="share of values hidden at random")
    p.add_argument("--epochs", type=int, default=None, help="training epochs (default: the package's)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
    # the engine is imported looks like torch's default to it
    torch.set_num_threads(args.threads)
    folder = Path(tempfile.mkdtemp(prefix="packed_output_"))
    source = folder / "era5.nc"
    write_packed_input(hide(era5_like(args.days), args.share), source)
    with geogpvae.open_dataset(source) as opened:
        given = opened.load()
    n = given.t2m.size
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, geogpvae {geogpvae.__version__}")
    print(f"field {dict(given.sizes)}: {n:,} cells, {int(given.t2m.isnull().sum()):,} hidden; "
          f"packing step {given.t2m.encoding['scale_factor']:.2e} K")
    start = time.perf_counter()
    out = geogpvae.impute(given, vars=["t2m"], epochs=args.epochs, progress=False, seed=0)
    print(f"impute: {time.perf_counter() - start:.1f} s")
    kept, dropped = folder / "kept.nc", folder / "dropped.nc"
    seconds_kept = timed_write(out, kept)
    plain = out.copy()
    plain["t2m"] = out.t2m.copy()
    plain["t2m_std"] = out.t2m_std.copy()
    for key in ("dtype", "scale_factor", "add_offset", "_FillValue", "missing_value"):
        plain.t2m.encoding.pop(key, None)
    plain.t2m_std.encoding.pop("dtype", None)
    seconds_dropped = timed_write(plain, dropped)
    with xr.open_dataset(kept, decode_cf=False) as raw:
        stored = (str(raw.t2m.dtype), str(raw.t2m_std.dtype))
    with xr.open_dataset(kept) as back:
        seen = given.t2m.notnull().values
        exact = bool(np.array_equal(back.t2m.values[seen], given.t2m.values[seen]))
        holes = out.t2m_imputed.values == 1
        rounding = np.abs(back.t2m.values[holes] - out.t2m.values[holes])
        ratio = float(np.max(rounding / out.t2m_std.values[holes]))
    mib = 1 << 20
    print(f"input (int16, zlib 4):          {source.stat().st_size / mib:7.2f} MiB")
    print(f"output, packing kept ({stored[0]} v, {stored[1]} v_std): {kept.stat().st_size / mib:7.2f} MiB, "
          f"written in {seconds_kept:.2f} s")
    print(f"output, packing dropped (float64 v, v_std): {dropped.stat().st_size / mib:7.2f} MiB, "
          f"written in {seconds_dropped:.2f} s")
    print(f"observed values bit for bit: {exact}; largest rounding of a fill / its std: {ratio:.4f}")


if __name__ == "__main__":
    main()
