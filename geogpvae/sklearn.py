"""A scikit-learn regressor on numpy arrays: coordinates in, values and their uncertainty out.

:class:`GPVAERegressor` is the engine behind :func:`geogpvae.impute` with the estimator
interface of scikit-learn (``fit(X, y)``, ``predict(X, return_std=True)``, ``score``), for
pipelines, cross-validation and grid searches. Needs scikit-learn (``pip install
"geogpvae[sklearn]"``); the rest of the package does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

try:
    from sklearn.base import BaseEstimator, RegressorMixin
    from sklearn.utils.validation import check_array, check_consistent_length, check_is_fitted, validate_data
except ImportError:  # scikit-learn missing, or older than validate_data
    raise ImportError('GPVAERegressor needs scikit-learn >= 1.6: pip install "geogpvae[sklearn]"') from None

from ._params import store_arguments
from .engine.config import GPVAEConfig
from .engine.core import GPVAEEngine

__all__ = ["GPVAERegressor"]


class GPVAERegressor(RegressorMixin, BaseEstimator):
    """GPVAE regression of one or several variables on coordinates, with NaN for missing values.

    The K columns of ``y`` are modelled jointly: a location where some are missing still
    informs the others through the shared latent GPs. Coordinates are used as given: the
    distances between rows of ``X`` decide the neighbours and the kernels, so give every
    column the same units (or scale them beforehand).

    Parameters
    ----------
    engine, neighbours, epochs, seed, device, latent_dim, encoder_hidden, decoder_hidden, \
context, kernel, lengthscale, noise, beta, ordering, mask_rate, batch_size, lr, samples, \
predict_mode, calibrate, threads, dtype, neighbour_backend
        The engine options, with the meanings and defaults of
        :class:`~geogpvae.engine.config.GPVAEConfig`.
    progress : bool or {"bar", "log", "none"}
        Progress display during ``fit``; False (default): none.

    Attributes
    ----------
    engine_ : GPVAEEngine
        The trained engine.
    n_features_in_ : int
        D, the number of coordinates.
    feature_names_in_ : ndarray of str
        Column names of ``X`` when it was a DataFrame with text column names.
    region_ : tuple of float
        ``(west, east, south, north)``, the bounding box of a fit on two coordinates (the
        default region of :meth:`grid`); not set for other fits.

    Notes
    -----
    Predictions average ``samples`` Monte Carlo draws of the latent variables, seeded by
    ``seed``: a fit predicts the same value at a location (to rounding) whatever the other rows
    of ``X``, and the same data, options and seed give the same fit.

    Passes :func:`sklearn.utils.estimator_checks.check_estimator`. The estimator does not
    check its options in ``__init__``; :meth:`fit` does, before any training.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 10, size=(200, 2))
    >>> y = np.sin(X[:, 0]) + np.cos(X[:, 1])
    >>> y[::5] = np.nan  # missing values
    >>> reg = GPVAERegressor(neighbours=8, epochs=20).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> mean.shape, bool((std > 0).all())
    ((3,), True)
    """

    def __init__(
        self,
        *,
        engine: str = GPVAEConfig.engine,
        neighbours: int = GPVAEConfig.neighbours,
        epochs: int | None = GPVAEConfig.epochs,
        seed: int = GPVAEConfig.seed,
        device: str = GPVAEConfig.device,
        latent_dim: int | None = GPVAEConfig.latent_dim,
        encoder_hidden: Sequence[int] = GPVAEConfig.encoder_hidden,
        decoder_hidden: Sequence[int] = GPVAEConfig.decoder_hidden,
        context: int | Sequence[int] = GPVAEConfig.context,
        kernel: Any = GPVAEConfig.kernel,
        lengthscale: float | None = GPVAEConfig.lengthscale,
        noise: float | None = GPVAEConfig.noise,
        beta: float | str | None = GPVAEConfig.beta,
        ordering: str = GPVAEConfig.ordering,
        mask_rate: float = GPVAEConfig.mask_rate,
        batch_size: int | None = GPVAEConfig.batch_size,
        lr: float | None = GPVAEConfig.lr,
        samples: int = GPVAEConfig.samples,
        predict_mode: str = GPVAEConfig.predict_mode,
        calibrate: bool = GPVAEConfig.calibrate,
        threads: int | None = GPVAEConfig.threads,
        dtype: str = GPVAEConfig.dtype,
        neighbour_backend: str = GPVAEConfig.neighbour_backend,
        progress: bool | str = False,
    ) -> None:
        store_arguments(self, locals())

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = True  # a deep model: small random test problems are not its ground
        return tags

    def fit(self, X: Any, y: Any) -> GPVAERegressor:
        """Train on the observed entries of ``y``.

        Parameters
        ----------
        X : array-like, shape (N, D)
            Coordinates, finite.
        y : array-like, shape (N,) or (N, K)
            Values; NaN where missing (every column needs observed values).

        Returns
        -------
        GPVAERegressor
            ``self``.

        Raises
        ------
        ValueError
            Bad options, non-finite ``X``, fewer than ``neighbours + 1`` rows, ``y`` missing or of
            another length, a column of ``y`` never observed (:class:`~geogpvae.InputError`).
        """
        config = GPVAEConfig.from_attributes(self)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=max(2, config.neighbours + 1))
        values = check_array(y, dtype=np.float64, ensure_all_finite="allow-nan", ensure_2d=False,
                             input_name="y")
        check_consistent_length(X, values)
        self._one_output = values.ndim == 1
        if X.shape[1] == 2:
            self.region_ = (float(X[:, 0].min()), float(X[:, 0].max()), float(X[:, 1].min()), float(X[:, 1].max()))
        self.engine_ = GPVAEEngine(config, progress=self.progress).fit(X, values.reshape(len(values), -1))
        return self

    def predict(self, X: Any, return_std: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """The predictive mean at new locations, and optionally its standard deviation.

        Parameters
        ----------
        X : array-like, shape (M, D)
            Coordinates, in the units of those of :meth:`fit`.
        return_std : bool
            Also return the predictive standard deviation (of a new observation: with the
            likelihood's noise, calibrated on held-out values).

        Returns
        -------
        mean : ndarray, shape (M,) or (M, K)
            As ``y`` was given to :meth:`fit`.
        std : ndarray, shape (M,) or (M, K)
            Only with ``return_std``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        pred = self.engine_.predict(X)
        mean, std = (np.asarray(a, dtype=np.float64) for a in (pred.mean, pred.std))
        if self._one_output:
            mean, std = mean[:, 0], std[:, 0]
        return (mean, std) if return_std else mean

    def grid(
        self,
        region: Sequence[float] | None = None,
        spacing: float | Sequence[float] | None = None,
        shape: Sequence[int] | None = None,
        dims: Sequence[str] = ("northing", "easting"),
        data_names: Sequence[str] | None = None,
    ) -> xr.Dataset:
        """Predict on a regular grid of a 2-D fit, as verde's ``grid``: mean and std in a Dataset.

        Parameters
        ----------
        region : sequence of float, optional
            ``(west, east, south, north)`` in the units of the columns of ``X`` (``X[:, 0]``
            runs west-east, ``X[:, 1]`` south-north); default :attr:`region_`, the data's.
        spacing : float or (float, float), optional
            Step of the grid, or ``(north-south, west-east)`` steps; each is adjusted so that
            whole steps span the region. Give ``spacing`` or ``shape``.
        shape : (int, int), optional
            Number of nodes ``(north-south, west-east)``, each at least 2.
        dims : (str, str)
            Names of the north-south and west-east dims, also the names of their coordinates.
        data_names : sequence of str, optional
            One name per column of ``y``; default ``"scalars"`` for one, ``"scalars_0"``, ... for
            several. Each std is ``<name>_std``.

        Returns
        -------
        xarray.Dataset
            ``<name>`` and ``<name>_std`` on ``dims``, of shape ``shape``.

        Raises
        ------
        ValueError
            A fit with other than two coordinates, both or neither of ``spacing`` and ``shape``,
            an empty region, a step not positive, or fewer than two nodes along a dim.
        """
        check_is_fitted(self)
        if self.n_features_in_ != 2:
            raise ValueError(f"grid needs a fit on 2 coordinates (easting, northing); this one has {self.n_features_in_}")
        west, east, south, north = _region(self.region_ if region is None else region)
        n_north, n_east = _grid_shape((north - south, east - west), spacing, shape)
        northing, easting = np.linspace(south, north, n_north), np.linspace(west, east, n_east)
        if len(tuple(dims)) != 2 or len(set(map(str, dims))) != 2:
            raise ValueError(f"dims must be two different names, got {dims!r}")
        ee, nn = np.meshgrid(easting, northing)
        mean, std = self.predict(np.column_stack([ee.ravel(), nn.ravel()]), return_std=True)
        mean, std = mean.reshape(n_north * n_east, -1), std.reshape(n_north * n_east, -1)
        k = mean.shape[1]
        names = list(data_names) if data_names is not None else (
            ["scalars"] if k == 1 else [f"scalars_{i}" for i in range(k)])
        if len(names) != k or len(set(names)) != k:
            raise ValueError(f"data_names must be {k} different name(s), got {data_names!r}")
        dn, de = map(str, dims)
        out = {}
        for i, name in enumerate(names):
            out[name] = ((dn, de), mean[:, i].reshape(n_north, n_east))
            out[f"{name}_std"] = ((dn, de), std[:, i].reshape(n_north, n_east),
                                  {"long_name": f"predictive standard deviation of {name}"})
        return xr.Dataset(out, coords={dn: northing, de: easting})

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of the predictions over the observed entries of ``y``, averaged over its columns.

        Parameters
        ----------
        X : array-like, shape (M, D)
        y : array-like, shape (M,) or (M, K)
            NaN where there is nothing to score.
        sample_weight : array-like, shape (M,), optional

        Returns
        -------
        float
            NaN when no column has two observed entries.
        """
        truth = check_array(y, dtype=np.float64, ensure_all_finite="allow-nan", ensure_2d=False, input_name="y")
        truth = truth.reshape(len(truth), -1)
        pred = np.asarray(self.predict(X)).reshape(len(truth), -1)
        weight = np.ones(len(truth)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        check_consistent_length(truth, weight)
        scores = []
        for k in range(truth.shape[1]):
            seen = np.isfinite(truth[:, k])
            if seen.sum() < 2:
                continue
            w, t, p = weight[seen], truth[seen, k], pred[seen, k]
            total = np.sum(w * (t - np.average(t, weights=w)) ** 2)
            residual = np.sum(w * (t - p) ** 2)
            scores.append(1.0 - residual / total if total > 0 else (1.0 if residual == 0 else 0.0))
        return float(np.mean(scores)) if scores else float("nan")


def _region(region: Sequence[float]) -> tuple[float, float, float, float]:
    values = np.asarray(region, dtype=np.float64).ravel()
    if values.size != 4 or not np.all(np.isfinite(values)):
        raise ValueError(f"region must be 4 finite numbers (west, east, south, north), got {region!r}")
    west, east, south, north = map(float, values)
    if not (east > west and north > south):
        raise ValueError(f"region {tuple(values)} is empty: it needs east > west and north > south")
    return west, east, south, north


def _grid_shape(extent: tuple[float, float], spacing: Any, shape: Any) -> tuple[int, int]:
    """Nodes (north-south, west-east) over ``extent`` (north-south, west-east) from a spacing or a shape."""
    if (spacing is None) == (shape is None):
        raise ValueError("give exactly one of spacing and shape")
    if shape is not None:
        sizes = np.asarray(shape).ravel()
        if sizes.size != 2 or sizes.dtype.kind not in "iu" or (sizes < 2).any():
            raise ValueError(f"shape must be two integers of at least 2, got {shape!r}")
        return int(sizes[0]), int(sizes[1])
    steps = np.broadcast_to(np.asarray(spacing, dtype=np.float64).ravel(), (2,)) \
        if np.size(spacing) in (1, 2) else None
    if steps is None or not np.all(np.isfinite(steps)) or (steps <= 0).any():
        raise ValueError(f"spacing must be a positive number or two, got {spacing!r}")
    nodes = tuple(int(round(e / s)) + 1 for e, s in zip(extent, steps, strict=True))
    if min(nodes) < 2:
        raise ValueError(f"spacing {spacing!r} is larger than the region: fewer than 2 nodes along a dim")
    return nodes
