"""Synthetic Gaussian-process fields with holes, for demos and fast tests.

Drawn with random Fourier features (Rahimi & Recht, 2007), so 10^6 points cost a matrix product;
:func:`make_field` and :func:`sample_gp_rff` work on NumPy arrays, :func:`make_gaussian_field`
returns an :class:`xarray.Dataset` with CF metadata.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

__all__ = ["SyntheticField", "sample_gp_rff", "grid_points", "make_field", "make_gaussian_field"]

_SPECTRAL_DOF = {"rbf": None, "matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def grid_points(shape: tuple[int, ...], spacing: float | tuple[float, ...] = 1.0) -> np.ndarray:
    """Coordinates of every node of a regular grid from 0, shape (prod(shape), len(shape)), C order.

    Parameters
    ----------
    shape : tuple of int
        Number of nodes along each axis, e.g. ``(43, 110, 30)``.
    spacing : float or tuple of float
        Node spacing along each axis (coordinate units).
    """
    spacing = np.broadcast_to(np.asarray(spacing, dtype=float), (len(shape),))
    axes = [np.arange(n, dtype=float) * s for n, s in zip(shape, spacing)]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=-1)


def sample_gp_rff(
    points: np.ndarray,
    lengthscale: float | np.ndarray,
    *,
    kernel: str = "rbf",
    n_samples: int = 1,
    n_features: int = 2048,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """Draw approximate samples of a zero-mean, unit-variance stationary GP, shape (N, n_samples).

    Parameters
    ----------
    points : array, shape (N, D)
        Locations.
    lengthscale : float or array of shape (D,)
        Lengthscale(s), in the units of ``points``.
    kernel : {"rbf", "matern12", "matern32", "matern52"}
        Covariance family; Matern spectra are multivariate Student-t.
    n_samples, n_features : int
        Independent sample paths, and random Fourier features (the more, the closer to the kernel).
    rng : numpy Generator, int or None
        Random source or seed.
    """
    if kernel not in _SPECTRAL_DOF:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {sorted(_SPECTRAL_DOF)}")
    rng = np.random.default_rng(rng)
    points = np.ascontiguousarray(points, dtype=float)
    n, d = points.shape
    ls = np.broadcast_to(np.asarray(lengthscale, dtype=float), (d,))
    out = np.empty((n, n_samples))
    for s in range(n_samples):
        omega = rng.standard_normal((d, n_features))
        nu = _SPECTRAL_DOF[kernel]
        if nu is not None:  # Student-t spectral density of the Matern kernel
            omega = omega / np.sqrt(rng.chisquare(2 * nu, size=n_features) / (2 * nu))
        omega = omega / ls[:, None]
        phase = rng.uniform(0.0, 2.0 * np.pi, size=n_features)
        weights = rng.standard_normal(n_features)
        out[:, s] = _fourier_sum(points, omega, phase, weights)
    return out


def _fourier_sum(points: np.ndarray, omega: np.ndarray, phase: np.ndarray, weights: np.ndarray,
                 chunk: int = 8192) -> np.ndarray:
    """``sqrt(2 / F) * cos(points @ omega + phase) @ weights``, shape (N,), float64.

    torch's multi-threaded cosine, in chunks of points (memory (chunk, F)); imported here, so the
    command line can check its arguments before importing torch.
    """
    import torch

    pts, om = torch.from_numpy(points), torch.from_numpy(omega)
    ph, w = torch.from_numpy(phase), torch.from_numpy(weights)
    out = torch.empty(len(points), dtype=torch.float64)
    for start in range(0, len(points), chunk):
        proj = torch.addmm(ph, pts[start : start + chunk], om)
        out[start : start + chunk] = proj.cos_() @ w
    return np.sqrt(2.0 / len(weights)) * out.numpy()


@dataclass
class SyntheticField:
    """A synthetic multi-variable field and the holes punched in it.

    Attributes
    ----------
    points : ndarray, shape (N, D)
        Locations.
    truth, observed : ndarray, shape (N, K)
        Complete values, and (bool) True where a value is observed.
    latent : ndarray, shape (N, L)
        The latent GP draws the variables were mixed from.
    """

    points: np.ndarray
    truth: np.ndarray
    observed: np.ndarray
    latent: np.ndarray

    @property
    def values(self) -> np.ndarray:
        """Observed values with NaN at the holes, shape (N, K)."""
        return np.where(self.observed, self.truth, np.nan)


def make_field(
    points: np.ndarray,
    *,
    n_vars: int = 3,
    n_latent: int = 2,
    lengthscale: float | np.ndarray = 0.2,
    kernel: str = "rbf",
    noise: float = 0.05,
    missing: float = 0.5,
    nonlinear: float = 0.3,
    fully_missing: float = 0.0,
    rng: np.random.Generator | int | None = 0,
) -> SyntheticField:
    """Mix ``n_latent`` GP draws into ``n_vars`` correlated variables and drop values: a :class:`SyntheticField`.

    ``y_k = sum_l W_kl f_l +/- nonlinear * tanh(f_1 f_2) + noise * eps`` with random ``W`` (rows of unit
    norm); every variable keeps at least one observed value.

    Parameters
    ----------
    points : array, shape (N, D)
        Locations.
    n_vars, n_latent : int
        Number of output variables K and of latent GPs L.
    lengthscale : float or array of shape (D,)
        GP lengthscale(s) in the units of ``points``.
    kernel : str
        Covariance family of the latent GPs (see :func:`sample_gp_rff`).
    noise, nonlinear : float
        Standard deviation of independent noise on every value, and weight of the interaction term.
    missing, fully_missing : float in [0, 1)
        Probability that each value is dropped; extra fraction of locations with every value dropped.
    rng : numpy Generator, int or None
        Random source or seed.
    """
    if not 0.0 <= missing < 1.0:
        raise ValueError(f"missing must be in [0, 1), got {missing}")
    rng = np.random.default_rng(rng)
    points = np.asarray(points, dtype=float)
    latent = sample_gp_rff(points, lengthscale, kernel=kernel, n_samples=n_latent, rng=rng)
    mixing = rng.standard_normal((n_latent, n_vars))
    mixing /= np.linalg.norm(mixing, axis=0, keepdims=True)
    truth = latent @ mixing
    if nonlinear and n_latent > 1:
        inter = np.tanh(latent[:, 0] * latent[:, 1])
        truth = truth + nonlinear * inter[:, None] * rng.choice([-1.0, 1.0], size=n_vars)
    truth = truth + noise * rng.standard_normal(truth.shape)
    observed = rng.random(truth.shape) >= missing
    if fully_missing:
        observed[rng.random(len(points)) < fully_missing] = False
    for k in range(n_vars):
        if not observed[:, k].any():
            observed[rng.integers(len(points)), k] = True
    return SyntheticField(points=points, truth=truth, observed=observed, latent=latent)


# --------------------------------------------------------------------------- as a Dataset
_DEFAULT_GRID_DIMS = {1: ("x",), 2: ("y", "x"), 3: ("z", "y", "x"), 4: ("t", "z", "y", "x")}
_AXIS = {"x": "X", "y": "Y", "z": "Z"}
_STANDARD = {
    "x": {"standard_name": "projection_x_coordinate"},
    "y": {"standard_name": "projection_y_coordinate"},
    "z": {"standard_name": "depth", "positive": "down"},
}


def _per_dim(value: float | Sequence[float], ndim: int, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        arr = np.full(ndim, float(arr))
    if arr.shape != (ndim,):
        raise ValueError(f"{what} must be a number or a sequence of {ndim}, got {value!r}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{what} must be positive and finite, got {value!r}")
    return arr


def make_gaussian_field(
    shape: Sequence[int] | None = None,
    *,
    n_points: int | None = None,
    dims: Sequence[str] | None = None,
    n_vars: int = 3,
    n_latent: int = 2,
    lengthscale: float | Sequence[float] = 0.2,
    kernel: str = "rbf",
    noise: float = 0.05,
    missing: float = 0.5,
    fully_missing: float = 0.0,
    nonlinear: float = 0.3,
    extent: float | Sequence[float] = 1.0,
    names: Sequence[str] | None = None,
    units: str = "km",
    seed: int | np.random.Generator | None = 0,
    return_truth: bool = False,
) -> xr.Dataset | tuple[xr.Dataset, xr.Dataset]:
    """A synthetic multi-variable Gaussian-process field with holes (see :func:`make_field`).

    Parameters
    ----------
    shape : sequence of int, optional
        Grid shape, 1 to 4 axes, e.g. ``(43, 110, 30)``; default ``(64, 64)`` unless ``n_points`` is given.
    n_points : int, optional
        Instead of a grid, this many points uniform in the domain, on dim ``site``.
    dims : sequence of str, optional
        Grid dim names in array order (default ``("x",)``, ``("y", "x")``, ``("z", "y", "x")`` or
        ``("t", "z", "y", "x")``), or the scattered points' coordinate names (default ``("x", "y")``).
    n_vars, n_latent : int
        Number of variables and of latent GPs.
    lengthscale, extent : float or sequence of float
        GP lengthscale as a fraction of the extent, and the domain size (coordinates run from 0 to it);
        one value or one per entry of ``dims``.
    kernel : {"rbf", "matern12", "matern32", "matern52"}
        Covariance family of the latent GPs.
    noise, nonlinear : float
        Standard deviation of independent noise (the variables have about unit variance), and weight
        of a smooth interaction between the first two latent GPs.
    missing, fully_missing : float in [0, 1)
        Probability that each value is dropped; extra fraction of locations with every value dropped.
    names : sequence of str, optional
        Variable names; default ``v0, v1, ...``.
    units : str
        Coordinate units; x, y are marked as projection coordinates, z as depth (positive down).
    seed : int, numpy Generator or None
        Random seed; the same seed gives the same field and holes.
    return_truth : bool
        Also return the field without holes.

    Returns
    -------
    xarray.Dataset or (xarray.Dataset, xarray.Dataset)
        Variables (float64, NaN at the holes) on the grid dims or on ``site``, and with
        ``return_truth`` the same without holes.

    Examples
    --------
    >>> ds = make_gaussian_field((32, 48), missing=0.3, seed=1)
    >>> dict(ds.sizes), list(ds.data_vars)
    ({'y': 32, 'x': 48}, ['v0', 'v1', 'v2'])
    >>> pts = make_gaussian_field(n_points=500, dims=("x", "y", "z"))
    >>> dict(pts.sizes), sorted(pts.coords)
    ({'site': 500}, ['x', 'y', 'z'])
    """
    names = _check_sizes(n_vars, n_latent, fully_missing, names)
    dims, grid_shape = _layout(shape, n_points, dims, names)
    ext = _per_dim(extent, len(dims), "extent")
    ls = _per_dim(lengthscale, len(dims), "lengthscale") * ext
    rng = np.random.default_rng(seed)
    points = _locations(grid_shape, n_points, ext, rng)
    field = make_field(
        points, n_vars=n_vars, n_latent=n_latent, lengthscale=ls, kernel=kernel, noise=noise,
        missing=missing, nonlinear=nonlinear, fully_missing=fully_missing, rng=rng,
    )
    layout = _Layout(dims, grid_shape, points, ext, units)
    attrs = {
        "title": "synthetic Gaussian-process field with holes",
        "source": "geogpvae.datasets.make_gaussian_field",
        "kernel": kernel,
        "lengthscale": ls,
        "n_latent": np.int32(n_latent),
        "noise": float(noise),
        "missing": float(missing),
        "fully_missing": float(fully_missing),
        "nonlinear": float(nonlinear),
    }
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        attrs["seed"] = int(seed)
    ds = layout.dataset(field.values, names, attrs)
    if return_truth:
        truth_attrs = {**attrs, "title": attrs["title"] + " (truth, no holes)"}
        return ds, layout.dataset(field.truth, names, truth_attrs)
    return ds


def _check_sizes(
    n_vars: int, n_latent: int, fully_missing: float, names: Sequence[str] | None
) -> list[str]:
    """Check the counts; the variable names (default ``v0, v1, ...``)."""
    for label, val in (("n_vars", n_vars), ("n_latent", n_latent)):
        if operator.index(val) < 1:
            raise ValueError(f"{label} must be >= 1, got {val}")
    if not 0.0 <= fully_missing < 1.0:
        raise ValueError(f"fully_missing must be in [0, 1), got {fully_missing}")
    names = [f"v{i}" for i in range(n_vars)] if names is None else list(names)
    if len(names) != n_vars or len(set(names)) != n_vars:
        raise ValueError(f"names must be {n_vars} distinct strings, got {names}")
    return names


def _layout(
    shape: Sequence[int] | None,
    n_points: int | None,
    dims: Sequence[str] | None,
    names: Sequence[str],
) -> tuple[tuple[str, ...], tuple[int, ...] | None]:
    """The dims and the grid shape (None for scattered points), checked."""
    if shape is not None and n_points is not None:
        raise ValueError("give either shape (a grid) or n_points (scattered points), not both")
    if n_points is not None:
        if operator.index(n_points) < 1:
            raise ValueError(f"n_points must be >= 1, got {n_points}")
        dims, grid_shape = (tuple(dims) if dims is not None else ("x", "y")), None
    else:
        grid_shape = tuple(operator.index(s) for s in (shape if shape is not None else (64, 64)))
        if not 1 <= len(grid_shape) <= 4 or min(grid_shape) < 1:
            raise ValueError(f"shape must have 1 to 4 positive sizes, got {shape}")
        dims = tuple(dims) if dims is not None else _DEFAULT_GRID_DIMS[len(grid_shape)]
        if len(dims) != len(grid_shape):
            raise ValueError(f"dims {dims} do not match shape {grid_shape}")
    if not dims or len(set(dims)) != len(dims):
        raise ValueError(f"dims must be distinct names, got {dims}")
    clash = set(dims) & (set(names) | {"site"})
    if clash:
        raise ValueError(f"dimension/coordinate names {sorted(clash)} clash with variables")
    return dims, grid_shape


def _locations(
    grid_shape: tuple[int, ...] | None, n_points: int | None, ext: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Grid nodes from 0 to ``ext`` along each axis, or uniform scattered points, shape (N, D)."""
    if grid_shape is not None:
        spacing = [e / (s - 1) if s > 1 else 0.0 for e, s in zip(ext, grid_shape)]
        return grid_points(grid_shape, spacing)
    return rng.uniform(0.0, 1.0, size=(operator.index(n_points), len(ext))) * ext


@dataclass
class _Layout:
    """Where the values of a synthetic field go: grid dims or a ``site`` dim with coordinates."""

    dims: tuple[str, ...]
    grid_shape: tuple[int, ...] | None
    points: np.ndarray
    extent: np.ndarray
    units: str

    def coord_attrs(self, d: str) -> dict:
        attrs = {"units": self.units, "long_name": f"{d} coordinate"}
        if d in _AXIS:
            attrs["axis"] = _AXIS[d]
            # CF: spatial axes carry a standard name, so checkers do not take x/y for lon/lat
            attrs.update(_STANDARD[d])
        return attrs

    def coords(self) -> dict[str, tuple]:
        if self.grid_shape is None:
            return {d: ("site", self.points[:, j], self.coord_attrs(d)) for j, d in enumerate(self.dims)}
        return {
            d: (d, np.linspace(0.0, e, s) if s > 1 else np.zeros(1), self.coord_attrs(d))
            for d, e, s in zip(self.dims, self.extent, self.grid_shape)
        }

    def dataset(self, values: np.ndarray, names: Sequence[str], attrs: dict) -> xr.Dataset:
        """The Dataset of ``values`` (N, K), one variable per name."""
        grid = self.grid_shape is not None
        var_dims = self.dims if grid else ("site",)
        to_shape = self.grid_shape if grid else (len(self.points),)
        data_vars = {
            name: (var_dims, values[:, j].reshape(to_shape),
                   {"long_name": f"synthetic variable {name}", "units": "1"})
            for j, name in enumerate(names)
        }
        return xr.Dataset(data_vars, coords=self.coords(), attrs=attrs)
