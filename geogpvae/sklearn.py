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
