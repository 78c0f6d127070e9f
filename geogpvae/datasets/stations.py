"""A synthetic station network: daily time series at scattered stations, stored the CF way.

CF ``timeSeries`` layout (dims ``(time, station)``, ``lat``/``lon`` and ``station_name`` on
``station``); the values are a space-time GP over (days, km east, km north), so each value is
correlated with the same station's neighbouring days and with nearby stations. Gaps: values
missing at random, and outages (runs of days when a station reports nothing).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np
import xarray as xr

from .synthetic import make_field

__all__ = ["make_station_network"]

_EARTH_RADIUS_KM = 6371.0088


def _local_km(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """East and north positions in km from the stations' mean position, shape (S, 2)."""
    lat0 = np.radians(lat.mean())
    east = _EARTH_RADIUS_KM * np.cos(lat0) * np.radians(lon - lon.mean())
    north = _EARTH_RADIUS_KM * np.radians(lat - lat.mean())
    return np.column_stack([east, north])


def _outages(
    shape: tuple[int, int], rate: float, days: tuple[int, int], rng: np.random.Generator
) -> np.ndarray:
    """True on the (time, station) cells inside an outage, shape (T, S): a Poisson number (mean ``rate``)
    per station, each at a uniform start and lasting a uniform whole number of days in ``days``."""
    n_days, n_stations = shape
    out = np.zeros(shape, dtype=bool)
    lo, hi = days
    for s in range(n_stations):
        for _ in range(rng.poisson(rate)):
            length = int(rng.integers(lo, hi + 1))
            start = int(rng.integers(0, max(1, n_days - length + 1)))
            out[start : start + length, s] = True
    return out


def _check(n_stations: int, n_days: int, missing: float, outage_days: tuple[int, int]) -> None:
    if operator.index(n_stations) < 2 or operator.index(n_days) < 2:
        raise ValueError(f"need at least 2 stations and 2 days, got {n_stations} and {n_days}")
    if not 0.0 <= missing < 1.0:
        raise ValueError(f"missing must be in [0, 1), got {missing}")
    lo, hi = outage_days
    if not 1 <= lo <= hi:
        raise ValueError(f"outage_days must be (shortest, longest) with 1 <= shortest <= longest, got {outage_days}")


def make_station_network(
    n_stations: int = 40,
    n_days: int = 300,
    *,
    n_vars: int = 1,
    n_latent: int = 2,
    time_scale: float = 2.0,
    space_scale: float = 200.0,
    kernel: str = "matern32",
    noise: float = 0.1,
    nonlinear: float = 0.0,
    missing: float = 0.1,
    outages: float = 1.5,
    outage_days: tuple[int, int] = (5, 30),
    region: tuple[float, float, float, float] = (5.0, 11.0, 45.5, 48.5),
    start: str = "2020-01-01",
    names: Sequence[str] | None = None,
    seed: int | np.random.Generator | None = 0,
    return_truth: bool = False,
) -> xr.Dataset | tuple[xr.Dataset, xr.Dataset]:
    """Daily values at a network of stations, drawn from a space-time GP, with gaps.

    Parameters
    ----------
    n_stations, n_days : int
        Number of stations S and of days T.
    n_vars, n_latent : int
        Number of variables and of latent space-time GPs mixed into them.
    time_scale, space_scale : float
        Lengthscales of the latent GPs in time (days) and in space (km).
    kernel : {"rbf", "matern12", "matern32", "matern52"}
        Covariance family (see :func:`geogpvae.datasets.synthetic.sample_gp_rff`).
    noise, nonlinear : float
        Standard deviation of independent noise (the variables have about unit variance), and weight
        of a smooth interaction between the first two latent GPs.
    missing : float in [0, 1)
        Probability that each value is missing, independently.
    outages, outage_days : float, (int, int)
        Mean number of outages per station (Poisson; no variable reported), and their shortest and longest days.
    region : (lon_min, lon_max, lat_min, lat_max)
        Stations are placed uniformly in this box (degrees).
    start : str
        First day, ISO 8601.
    names : sequence of str, optional
        Variable names; default ``v0, v1, ...``.
    seed : int, numpy Generator or None
        The same seed gives the same network, values and gaps.
    return_truth : bool
        Also return the values without gaps.

    Returns
    -------
    xarray.Dataset or (xarray.Dataset, xarray.Dataset)
        Variables (T, S) on ``(time, station)`` (float64, NaN in the gaps) with coordinates ``time``
        (daily), ``lat``, ``lon`` and ``station_name``; with ``return_truth`` also the same without gaps.

    Examples
    --------
    >>> ds = make_station_network(30, 200, seed=1)
    >>> dict(ds.sizes), sorted(ds.coords)
    ({'time': 200, 'station': 30}, ['lat', 'lon', 'station_name', 'time'])
    """
    _check(n_stations, n_days, missing, outage_days)
    names = [f"v{i}" for i in range(n_vars)] if names is None else list(names)
    if len(names) != n_vars or len(set(names)) != n_vars:
        raise ValueError(f"names must be {n_vars} distinct strings, got {names}")
    rng = np.random.default_rng(seed)
    lon = rng.uniform(region[0], region[1], n_stations)
    lat = rng.uniform(region[2], region[3], n_stations)
    km = _local_km(lon, lat)
    days = np.arange(n_days, dtype=float)
    # (time, station) in C order: time slowest, as the Dataset's arrays
    points = np.column_stack([np.repeat(days, n_stations), np.tile(km[:, 0], n_days), np.tile(km[:, 1], n_days)])
    field = make_field(
        points, n_vars=n_vars, n_latent=n_latent, lengthscale=[time_scale, space_scale, space_scale],
        kernel=kernel, noise=noise, missing=missing, nonlinear=nonlinear, rng=rng,
    )
    down = _outages((n_days, n_stations), outages, outage_days, rng).reshape(-1)
    observed = field.observed & ~down[:, None]
    attrs = {
        "title": "synthetic station network (space-time Gaussian process) with gaps",
        "source": "geogpvae.datasets.make_station_network",
        "Conventions": "CF-1.8",
        "featureType": "timeSeries",
        "kernel": kernel,
        "time_scale_days": float(time_scale),
        "space_scale_km": float(space_scale),
        "n_latent": np.int32(n_latent),
        "noise": float(noise),
        "missing": float(missing),
        "outages_per_station": float(outages),
    }
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        attrs["seed"] = int(seed)
    coords = _coords(lon, lat, n_days, start)
    ds = _dataset(np.where(observed, field.truth, np.nan), names, coords, attrs, (n_days, n_stations))
    if return_truth:
        truth_attrs = {**attrs, "title": attrs["title"] + " (truth, no gaps)"}
        return ds, _dataset(field.truth, names, coords, truth_attrs, (n_days, n_stations))
    return ds


def _coords(lon: np.ndarray, lat: np.ndarray, n_days: int, start: str) -> dict[str, tuple]:
    time = np.datetime64(start, "D") + np.arange(n_days).astype("timedelta64[D]")
    width = len(str(len(lon) - 1))
    return {
        "time": ("time", time.astype("datetime64[ns]"), {"standard_name": "time", "axis": "T"}),
        "lat": ("station", lat, {"standard_name": "latitude", "units": "degrees_north"}),
        "lon": ("station", lon, {"standard_name": "longitude", "units": "degrees_east"}),
        "station_name": ("station", np.array([f"ST{i:0{width}d}" for i in range(len(lon))]),
                         {"cf_role": "timeseries_id", "long_name": "station identifier"}),
    }


def _dataset(values: np.ndarray, names: list[str], coords: dict, attrs: dict, shape: tuple[int, int]) -> xr.Dataset:
    data_vars = {
        name: (("time", "station"), values[:, j].reshape(shape),
               {"long_name": f"synthetic station variable {name}", "units": "1"})
        for j, name in enumerate(names)
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)
