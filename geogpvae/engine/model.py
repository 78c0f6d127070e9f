"""The neighbour-driven GPVAE: encoder, decoder, latent GP prior and the mini-batch ELBO.

Shapes: N locations with D-dimensional coordinates, K variables, L latent channels, H
neighbours, B locations in a mini-batch and U distinct locations that the batch needs encoded
(the batch and its neighbours).

The ELBO estimators are those of the paper (eq. 8 for HPA, eq. 10 for SPA), with the
likelihood and KL mini-batches equal (I = J):

* SPA: ``N/B sum_i E_q[log p(y_i | z_i)] - beta N/B sum_i E_q KL[q(z_i) || p(z_i | Z_n(i))]``
* HPA: ``N/B sum_i E_q[log p(y_i | z_i)] - beta 1/B sum_i KL[q(Z_n(i)) || p(Z_n(i))]``

The module returns the *negative ELBO divided by N* as its loss, so that the learning rate does
not depend on the size of the field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from ..gp.kernels import LatentKernel
from ..gp.priors import PRIORS
from ..gp.rows import take_rows
from ..gp.user_kernels import GPyTorchLatentKernel

__all__ = ["Batch", "GPVAE", "mlp"]

_MIN_VAR = 1e-6


def mlp(sizes: Sequence[int]) -> nn.Sequential:
    """A ReLU multilayer perceptron with the given layer widths (input first, output last)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Batch(NamedTuple):
    """One mini-batch, already gathered into tensors.

    Attributes
    ----------
    y : Tensor, shape (U, K)
        Standardised values of the locations to encode (0 where missing).
    observed : Tensor of bool, shape (U, K)
        Which values exist.
    visible : Tensor of bool, shape (U, K)
        Which values the encoder may see (a subset of ``observed``).
    context : Tensor, shape (U, C) or None
        Neighbourhood summaries for the encoder.
    batch_pos : Tensor of int64, shape (B,)
        Rows of the batch locations among the U encoded ones.
    nbr_pos : Tensor of int64, shape (B, H)
        Rows of each batch location's neighbours among the U (0 at padded slots).
    nbr_valid : Tensor of bool, shape (B, H)
        False at padded slots.
    x_batch : Tensor, shape (B, D)
        Coordinates of the batch locations.
    x_nbr : Tensor, shape (B, H, D)
        Coordinates of the neighbours.
    n_total : int
        N, the number of locations in the field.
    stencil_offsets : Tensor, shape (S, H, D), optional
        When neighbour geometries repeat (grids): the distinct neighbour offsets in this batch.
    stencil_valid : Tensor of bool, shape (S, H), optional
    stencil_index : Tensor of int64, shape (B,), optional
        The stencil of every batch location; its neighbours are listed in stencil order.
    """

    y: torch.Tensor
    observed: torch.Tensor
    visible: torch.Tensor
    context: torch.Tensor | None
    batch_pos: torch.Tensor
    nbr_pos: torch.Tensor
    nbr_valid: torch.Tensor
    x_batch: torch.Tensor
    x_nbr: torch.Tensor
    n_total: int
    stencil_offsets: torch.Tensor | None = None
    stencil_valid: torch.Tensor | None = None
    stencil_index: torch.Tensor | None = None


#: the least moving-average count of hidden values per step behind a pattern's own hidden-value
#: variance (fewer: the variable's pooled one); see :meth:`GPVAE.hidden_var_at`
PATTERN_MIN_COUNT = 5.0
#: seed of the generator behind the hidden-value moments' latent draws
MOMENT_SEED = 20_240_531
#: the hidden-value moments are updated every this many training steps (each update decodes
#: two latent draws of the batch, too slow to do at every step)
MOMENT_EVERY = 4
#: up to this many variables the hidden-value variance is also kept per pattern of the others seen
MAX_PATTERN_VARS = 10
#: :attr:`GPVAE.hidden_ratio` is kept within [_MIN_RATIO, 1 / _MIN_RATIO]
_MIN_RATIO = 1e-3


def pattern_count(n_vars: int) -> int:
    """Patterns of the other variables seen kept per variable: 2^(K-1), or one (pooled) beyond
    :data:`MAX_PATTERN_VARS` variables."""
    return 2 ** (n_vars - 1) if n_vars <= MAX_PATTERN_VARS else 1


def _moment_estimate(sq: torch.Tensor, spread: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """``h = mean((y - m)^2) - mean(s)`` from the moving sums (see :meth:`GPVAE.update_hidden_moments`)."""
    return ((sq - spread) / count.clamp_min(1e-12)).clamp_min(_MIN_VAR)


def _read_moment_steps(module: nn.Module, _keys: Any) -> None:
    """After loading weights, the host's copy of the training-step count (a checkpoint resumed)."""
    module._steps_on_host = int(module.moment_steps)


class GPVAE(nn.Module):
    """A GP variational autoencoder with a neighbour-driven (SPA or HPA) latent prior.

    Parameters
    ----------
    n_vars : int
        K, the number of variables.
    n_dims : int
        D, the number of coordinates.
    latent_dim : int
        L, the number of latent GP channels.
    engine : {"spa", "hpa"}
        Which prior approximation the KL term uses.
    context_dim : int
        Width C of the neighbourhood summary fed to the encoder (0 for none).
    encoder_hidden, decoder_hidden : sequence of int
        Hidden widths of the two MLPs.
    kernel : str or gpytorch.kernels.Kernel
        Latent kernel family, or a stationary gpytorch kernel copied for each channel.
    lengthscale, outputscale : float
        Initial kernel hyperparameters.
    learn_kernel : bool
        Whether they are trained.
    noise : float or sequence of float
        Initial likelihood variance of every variable (standardised units): one value for
        all, or one per variable.
    learn_noise : bool
        Whether the K likelihood variances are trained.
    beta : float
        KL weight.
    jitter : float
        Relative nugget of the prior.
    hidden_variance : bool or "auto"
        Estimate, beside the likelihood variance, the variance a value *hidden from the
        encoder* needs on top of the decoded latent spread (:attr:`hidden_estimate`, and per
        pattern of other variables seen :meth:`hidden_var_at`; see
        :meth:`update_hidden_moments`). True: use it in the predictive of values the model did
        not see (:attr:`hidden_var`). ``"auto"``: estimate it but keep the likelihood variance
        as :attr:`hidden_var` (the engine's calibration chooses). False: nothing is estimated;
        the predictive adds the likelihood variance, as in the paper.
    """

    def __init__(
        self,
        n_vars: int,
        n_dims: int,
        latent_dim: int,
        *,
        engine: str = "spa",
        context_dim: int = 0,
        encoder_hidden: Sequence[int] = (128, 128),
        decoder_hidden: Sequence[int] = (128, 128),
        kernel: Any = "matern32",
        lengthscale: float = 1.0,
        outputscale: float = 1.0,
        learn_kernel: bool = True,
        noise: float | Sequence[float] = 0.1,
        learn_noise: bool = True,
        beta: float = 1.0,
        jitter: float = 1e-4,
        hidden_variance: bool | str = False,
    ) -> None:
        super().__init__()
        if engine not in ("spa", "hpa"):
            raise ValueError(f"unknown engine {engine!r}; choose 'spa' or 'hpa'")
        self.n_vars, self.n_dims, self.latent_dim = int(n_vars), int(n_dims), int(latent_dim)
        self.engine = engine
        self.context_dim = int(context_dim)
        self.beta = float(beta)
        self.jitter = float(jitter)
        self.encoder = mlp([2 * self.n_vars + self.context_dim, *encoder_hidden, 2 * self.latent_dim])
        self.decoder = mlp([self.latent_dim, *decoder_hidden, self.n_vars])
        if isinstance(kernel, str):
            self.kernel = LatentKernel(
                kernel, self.latent_dim, self.n_dims, lengthscale=lengthscale, outputscale=outputscale,
                learn_lengthscale=learn_kernel, learn_outputscale=learn_kernel,
            )
        else:  # a gpytorch kernel: its own initial hyperparameters
            self.kernel = GPyTorchLatentKernel(kernel, self.latent_dim, self.n_dims)
            self.kernel.requires_grad_(learn_kernel)
        start = torch.as_tensor(noise, dtype=torch.float64).expand(self.n_vars)
        raw_noise = (start + torch.log(-torch.expm1(-start))).to(torch.get_default_dtype())
        if learn_noise:
            self.raw_noise = nn.Parameter(raw_noise)
        else:
            self.register_buffer("raw_noise", raw_noise)
        if hidden_variance not in (True, False, "auto"):
            raise ValueError(f"hidden_variance must be True, False or 'auto', not {hidden_variance!r}")
        self.hidden_variance: bool | str = hidden_variance
        # the draws behind the moments come from a generator of their own, so that keeping
        # them changes nothing else in training (hidden_variance="auto" fits as False does)
        self._moment_generator: torch.Generator | None = None
        # training steps seen (the moments are updated every MOMENT_EVERY, each from draws seeded
        # by the step): a checkpoint resumes them as they would have gone on
        self.register_buffer("moment_steps", torch.zeros((), dtype=torch.int64))
        self._steps_on_host = 0  # the same count, read without a device sync every step
        self.register_load_state_dict_post_hook(_read_moment_steps)
        # running moments of the encoder-hidden values: sum of squared errors of the predictive
        # mean, sum of decoded latent spreads, count (per variable), as moving averages
        self.register_buffer("hidden_moments", torch.zeros(3, self.n_vars))
        # the same moments per pattern of the *other* variables the encoder saw (see
        # :meth:`hidden_var_at`): 2^(K-1) patterns per variable, one pooled pattern beyond
        # MAX_PATTERN_VARS variables
        self.n_patterns = pattern_count(self.n_vars)
        self.register_buffer("pattern_moments", torch.zeros(3, self.n_vars, self.n_patterns))

    # ------------------------------------------------------------------ pieces
    @property
    def noise_var(self) -> torch.Tensor:
        """Likelihood variance of each variable, shape (K,), standardised units."""
        return F.softplus(self.raw_noise) + _MIN_VAR

    @property
    def hidden_var(self) -> torch.Tensor:
        """Variance added by default to the decoded latent spread in the predictive of a value
        the model did not see, shape (K,), standardised units: :attr:`hidden_estimate` with
        ``hidden_variance=True``, else the likelihood variance (the paper's predictive; with
        ``"auto"`` the engine's calibration chooses between them per regime)."""
        if self.hidden_variance is not True:
            return self.noise_var
        return self.hidden_estimate

    @property
    def hidden_estimate(self) -> torch.Tensor:
        """The moment estimate, from the values hidden from the encoder in training (see
        :meth:`update_hidden_moments`), of the variance a hidden value needs on top of the
        decoded latent spread, shape (K,), standardised units; the likelihood variance where
        there is none."""
        sq, spread, count = self.hidden_moments
        est = _moment_estimate(sq, spread, count)
        return torch.where(count > 0, est.to(self.noise_var.dtype), self.noise_var.detach())

    @property
    def hidden_ratio(self) -> torch.Tensor:
        """How much wider the likelihood's predictive must be for values hidden from the encoder.

        The ratio, over the values hidden from the encoder in training (the moments of
        :meth:`update_hidden_moments`), of their mean squared error to the mean predictive
        variance the likelihood gives them (decoded latent spread plus likelihood variance):
        ``mean((y - m)^2) / (mean(s) + sigma^2)``, shape (K,); 1 where there is none. Scaling
        the likelihood's predictive variance by it (the added variance ``"scaled"`` of
        :mod:`geogpvae.engine.calibration`) keeps that predictive's shape, which follows the
        spread from location to location, and gives it the width the hidden values showed.
        """
        sq, spread, count = self.hidden_moments
        lik = self.noise_var.detach().to(sq.dtype)
        ratio = sq.clamp_min(0) / (spread + lik * count).clamp_min(1e-30)
        return torch.where(count > 0, ratio.clamp(_MIN_RATIO, 1 / _MIN_RATIO), torch.ones_like(ratio))

    def pattern_index(self, visible: torch.Tensor) -> torch.Tensor:
        """For every location and variable, the code of the pattern of the *other* variables seen.

        Parameters
        ----------
        visible : Tensor of bool, shape (M, K)

        Returns
        -------
        Tensor of int64, shape (M, K)
            Entry ``(i, j)`` in ``[0, 2^(K-1))``: bit ``b`` set when the ``b``-th variable other
            than ``j`` (in order) is seen at location ``i``. All zeros beyond
            :data:`MAX_PATTERN_VARS` variables.
        """
        k = self.n_vars
        if self.n_patterns == 1:
            return torch.zeros(visible.shape, dtype=torch.long, device=visible.device)
        j = torch.arange(k, device=visible.device)
        code = (visible.long() << j).sum(-1, keepdim=True)  # (M, 1): all variables seen
        below = code & ((1 << j) - 1)  # variables before j keep their bits
        above = code >> (j + 1)  # variables after j move down one bit
        return below | (above << j)

    def hidden_var_at(self, visible: torch.Tensor) -> torch.Tensor:
        """:attr:`hidden_estimate` for each location, from the pattern of other variables seen there.

        How well a hidden value is predicted depends on which other variables the encoder
        sees at that location (a twin channel seen makes it nearly known; nothing seen leaves
        only the neighbours). The moments behind :attr:`hidden_estimate` are therefore also kept
        per pattern; a pattern with a moving-average count below :data:`PATTERN_MIN_COUNT`
        hidden values per step falls back on the variable's pooled estimate.

        Parameters
        ----------
        visible : Tensor of bool, shape (M, K)
            The variables the encoder sees at each location.

        Returns
        -------
        Tensor, shape (M, K)
            Standardised units.
        """
        pooled = self.hidden_estimate
        if not self.hidden_variance:
            return pooled.expand(visible.shape)
        sq, spread, count = self.pattern_moments
        est = _moment_estimate(sq, spread, count).to(pooled.dtype)  # (K, P)
        idx = self.pattern_index(visible)
        var_j = torch.arange(self.n_vars, device=visible.device).expand_as(idx)
        return torch.where(count[var_j, idx] >= PATTERN_MIN_COUNT, est[var_j, idx], pooled.expand_as(idx))

    def encode(
        self, y: torch.Tensor, visible: torch.Tensor, context: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean-field posterior ``q(z | y)`` of each location.

        Parameters
        ----------
        y : Tensor, shape (M, K)
            Standardised values (anything at hidden entries: they are zeroed here).
        visible : Tensor of bool, shape (M, K)
            Entries the encoder sees.
        context : Tensor, shape (M, C), optional

        Returns
        -------
        mean, var : Tensor, shape (M, L)
        """
        mask = visible.to(y.dtype)
        parts = [y * mask, mask]
        if self.context_dim:
            if context is None:
                raise ValueError("this model's encoder needs neighbourhood context")
            parts.append(context)
        out = self.encoder(torch.cat(parts, dim=-1))
        mean, raw = out.split(self.latent_dim, dim=-1)
        return mean, F.softplus(raw) + _MIN_VAR


    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Mean of ``p(y | z)``, shape ``z.shape[:-1] + (K,)``."""
        return self.decoder(z)

    def expected_loglik(
        self,
        y: torch.Tensor,
        observed: torch.Tensor,
        mean: torch.Tensor,
        var: torch.Tensor,
        n_samples: int = 1,
    ) -> torch.Tensor:
        """Reparameterised estimate of ``E_q(z_i)[log p(y_i | z_i)]`` over observed entries.

        Parameters
        ----------
        y : Tensor, shape (B, K)
        observed : Tensor of bool, shape (B, K)
        mean, var : Tensor, shape (B, L)
            The encoder posterior of each location.
        n_samples : int

        Returns
        -------
        Tensor, shape (B,)
            Nats per location.
        """
        eps = torch.randn((n_samples, *mean.shape), dtype=mean.dtype, device=mean.device)
        z = mean + var.sqrt() * eps
        pred = self.decode(z)  # (S, B, K)
        noise = self.noise_var
        logpdf = -0.5 * ((y - pred).square() / noise + torch.log(2 * math.pi * noise))
        return (logpdf * observed.to(y.dtype)).sum(-1).mean(0)

    HIDDEN_DECAY = 0.98
    """Memory of the hidden-value moments per update (about the last 50 updates, 200 training steps)."""

    @torch.no_grad()
    def update_hidden_moments(
        self, y: torch.Tensor, hidden: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, n_samples: int = 2,
        visible: torch.Tensor | None = None, seed: int = MOMENT_SEED,
    ) -> None:
        """Fold one batch's encoder-hidden values into the moments behind :attr:`hidden_var`.

        The predictive of a value the encoder did not see is the decoded latent posterior
        (mean ``m``, spread ``s``) plus a variance ``h``; moment matching over the hidden
        values gives ``h = mean((y - m)^2) - mean(s)``. The likelihood variance cannot serve
        here: it is learnt mostly from values the encoder saw, so it measures how well values
        are reconstructed, not predicted. ``m`` and ``s`` come from ``n_samples`` latent draws
        (the squared error of an S-sample mean exceeds that of the exact mean by ``s / S`` on
        average, which is subtracted). Nothing here has a gradient: the ELBO is unchanged.

        Parameters
        ----------
        y : Tensor, shape (B, K)
        hidden : Tensor of bool, shape (B, K)
            Observed values the encoder was not shown.
        mean, var : Tensor, shape (B, L)
        n_samples : int
        visible : Tensor of bool, shape (B, K), optional
            The entries the encoder saw: the moments are also folded in per pattern of the
            other variables seen (:meth:`hidden_var_at`).
        seed : int
            Of the latent draws (a generator of their own: the training's draws are untouched).
        """
        if not self.hidden_variance:
            return
        # a batch without hidden values leaves the moments as they are: checked at once on the
        # CPU; on an accelerator the check stays on the device (reading it back would stall
        # every step that updates the moments) and selects the old moments there
        keep = None if y.device.type == "cpu" else hidden.any()
        if keep is None and not bool(hidden.any()):
            return
        mask = hidden.to(y.dtype)
        gen = self._moment_generator
        if gen is None or gen.device != mean.device:
            gen = self._moment_generator = torch.Generator(device=mean.device)
        gen.manual_seed(seed)
        eps = torch.randn((n_samples, *mean.shape), generator=gen, dtype=mean.dtype, device=mean.device)
        dec = self.decode(mean + var.sqrt() * eps)
        centre = dec.mean(0)
        spread = (dec - centre).square().sum(0) / (n_samples - 1)  # unbiased; Tensor.var is slow here
        sq = (y - centre).square() - spread / n_samples
        batch = torch.stack([(sq * mask).sum(0), (spread * mask).sum(0), mask.sum(0)]).to(self.hidden_moments.dtype)
        self._fold(self.hidden_moments, batch, keep)
        if visible is not None:
            k, n_pat = self.n_vars, self.n_patterns
            slot = torch.arange(k, device=y.device) * n_pat + self.pattern_index(visible)  # (B, K)
            parts = torch.stack([sq * mask, spread * mask, mask]).to(self.pattern_moments.dtype)  # (3, B, K)
            acc = torch.zeros(3, k * n_pat, dtype=parts.dtype, device=y.device)
            acc.scatter_add_(1, slot.reshape(1, -1).expand(3, -1), parts.reshape(3, -1))
            self._fold(self.pattern_moments, acc.view(3, k, n_pat), keep)

    def _fold(self, moments: torch.Tensor, batch: torch.Tensor, keep: torch.Tensor | None) -> None:
        """``moments <- decay * moments + (1 - decay) * batch`` in place; where ``keep`` (a
        0-d bool tensor on the device) is False, the moments stay as they are."""
        if keep is None:
            moments.mul_(self.HIDDEN_DECAY).add_(batch, alpha=1 - self.HIDDEN_DECAY)
        else:
            moments.copy_(torch.where(keep, moments.mul(self.HIDDEN_DECAY).add(batch, alpha=1 - self.HIDDEN_DECAY),
                                      moments))

    # ------------------------------------------------------------------ ELBO
    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Mini-batch ELBO terms.

        Returns
        -------
        dict
            ``loss`` (negative ELBO estimate / N, the quantity minimised), ``expected_nll``
            (minus the mean expected log-likelihood per location) and ``kl`` (the KL
            estimate / N, unweighted), all scalars. In training mode (every :data:`MOMENT_EVERY`
            steps) the values hidden from the encoder also update the moments behind
            :attr:`hidden_estimate` and :meth:`hidden_var_at` (no gradient).
        """
        mean_u, var_u = self.encode(batch.y, batch.visible, batch.context)
        pos = batch.batch_pos
        loglik = self.expected_loglik(
            batch.y[pos], batch.observed[pos], take_rows(mean_u, pos), take_rows(var_u, pos),
            n_samples=self._train_samples,
        )
        kl_per_location = PRIORS[self.engine].kl(self.kernel, batch, mean_u, var_u, self.jitter)
        expected_nll = -loglik.mean()
        loss = expected_nll + self.beta * kl_per_location
        if self.training and self.hidden_variance:
            step = self._steps_on_host
            if step % MOMENT_EVERY == 0:
                hidden = batch.observed[pos] & ~batch.visible[pos]
                self.update_hidden_moments(batch.y[pos], hidden, mean_u[pos].detach(), var_u[pos].detach(),
                                           visible=batch.visible[pos], seed=MOMENT_SEED + step)
            self.moment_steps.add_(1)
            self._steps_on_host += 1
        return {"loss": loss, "expected_nll": expected_nll, "kl": kl_per_location}

    _train_samples: int = 1

    def set_train_samples(self, n: int) -> None:
        """Monte Carlo samples of z per location in the training likelihood."""
        self._train_samples = int(n)
