"""Synthetic Gaussian-process fields with holes, as plain NumPy arrays.

These fields drive the fast tests and the demos. They are drawn with random Fourier
features (Rahimi & Recht, 2007), so that a field on 10^6 points costs a matrix product,
not a Cholesky factorisation of an N x N covariance.

The xarray wrapper that users call is :func:`geogpvae.datasets.make_gaussian_field`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SyntheticField", "sample_gp_rff", "grid_points", "make_field"]

_SPECTRAL_DOF = {"rbf": None, "matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def grid_points(shape: tuple[int, ...], spacing: float | tuple[float, ...] = 1.0) -> np.ndarray:
    """Coordinates of every node of a regular grid, C order (last axis fastest).

    Parameters
    ----------
    shape : tuple of int
        Number of nodes along each axis, e.g. ``(43, 110, 30)``.
    spacing : float or tuple of float
        Node spacing along each axis (coordinate units).

    Returns
    -------
    numpy.ndarray, shape (prod(shape), len(shape))
        Node coordinates, starting at 0 on every axis.
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
    """Draw approximate samples of a zero-mean, unit-variance stationary GP.

    Parameters
    ----------
    points : array, shape (N, D)
        Locations.
    lengthscale : float or array of shape (D,)
        Lengthscale(s), in the units of ``points``.
    kernel : {"rbf", "matern12", "matern32", "matern52"}
        Covariance family; Matern spectra are multivariate Student-t.
    n_samples : int
        Number of independent sample paths.
    n_features : int
        Number of random Fourier features; the sample's covariance approaches the kernel as
        this grows.
    rng : numpy Generator, int or None
        Random source or seed.

    Returns
    -------
    numpy.ndarray, shape (N, n_samples)
        Sample values at ``points``.
    """
    if kernel not in _SPECTRAL_DOF:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {sorted(_SPECTRAL_DOF)}")
    rng = np.random.default_rng(rng)
    points = np.asarray(points, dtype=float)
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
        # chunk over points so that memory stays at (chunk, n_features)
        for start in range(0, n, 8192):
            proj = points[start : start + 8192] @ omega + phase
            out[start : start + 8192, s] = np.sqrt(2.0 / n_features) * (np.cos(proj) @ weights)
    return out


@dataclass
class SyntheticField:
    """A synthetic multi-variable field and the holes punched in it.

    Attributes
    ----------
    points : ndarray, shape (N, D)
        Locations.
    truth : ndarray, shape (N, K)
        Complete values.
    observed : ndarray of bool, shape (N, K)
        True where a value is observed.
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
    """Mix ``n_latent`` GP draws into ``n_vars`` correlated variables and drop values.

    Each variable is ``y_k = sum_l W_kl f_l + nonlinear * tanh(f_1 f_2 ...) + noise * eps``,
    with a random mixing matrix ``W`` (rows of unit norm), so the variables share spatial
    structure the way metal concentrations or rock properties do.

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
    noise : float
        Standard deviation of independent noise on every value.
    missing : float in [0, 1)
        Probability that each value is dropped, independently.
    nonlinear : float
        Weight of a smooth nonlinear interaction term.
    fully_missing : float in [0, 1)
        Extra fraction of locations whose values are all dropped.
    rng : numpy Generator, int or None
        Random source or seed.

    Returns
    -------
    SyntheticField
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
    # every variable keeps at least one observed value
    for k in range(n_vars):
        if not observed[:, k].any():
            observed[rng.integers(len(points)), k] = True
    return SyntheticField(points=points, truth=truth, observed=observed, latent=latent)
