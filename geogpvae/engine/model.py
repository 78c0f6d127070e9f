"""The neighbour-driven GPVAE: encoder, decoder, latent GP prior and the mini-batch ELBO.

Shapes: N locations, D coordinates, K variables, L latent channels, H neighbours, B batch
locations, U locations encoded (batch and neighbours). The loss is the negative ELBO / N
(paper eq. 10 for SPA, eq. 8 for HPA, I = J):

* SPA: ``N/B sum_i E_q[log p(y_i | z_i)] - beta N/B sum_i E_q KL[q(z_i) || p(z_i | Z_n(i))]``
* HPA: ``N/B sum_i E_q[log p(y_i | z_i)] - beta 1/B sum_i KL[q(Z_n(i)) || p(Z_n(i))]``
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
    x_nbr : Tensor, shape (B, H, D)
    n_total : int
        N, the number of locations in the field.
    stencil_offsets : Tensor, shape (S, H, D), optional
        The batch's distinct neighbour offsets, where geometries repeat (grids).
    stencil_valid : Tensor of bool, shape (S, H), optional
    stencil_index : Tensor of int64, shape (B,), optional
        The stencil of every batch location (neighbours listed in stencil order).
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


#: the least moving-average count per step behind a pattern's own variance (:meth:`GPVAE.hidden_var_at`)
PATTERN_MIN_COUNT = 5.0
#: seed of the generator behind the hidden-value moments' latent draws
MOMENT_SEED = 20_240_531
#: the hidden-value moments are updated every this many training steps (each decodes two draws)
MOMENT_EVERY = 4
#: up to this many variables the hidden-value variance is also kept per pattern of the others seen
MAX_PATTERN_VARS = 10
#: :attr:`GPVAE.hidden_ratio` is kept within [_MIN_RATIO, 1 / _MIN_RATIO]
_MIN_RATIO = 1e-3


def pattern_count(n_vars: int) -> int:
    """Patterns of the other variables seen kept per variable: 2^(K-1), one beyond :data:`MAX_PATTERN_VARS`."""
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
    n_vars, n_dims, latent_dim : int
        K variables, D coordinates, L latent GP channels.
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
    noise : float or sequence of float
        Initial likelihood variance (standardised units), one for all or one per variable.
    beta, jitter : float
        KL weight; relative nugget of the prior.
    hidden_variance : bool
        Also estimate the variance a value *hidden from the encoder* needs on top of the
        decoded latent spread (:attr:`hidden_estimate`, per pattern :meth:`hidden_var_at`),
        for the engine's calibration to choose from. False: the paper's predictive only.
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
        noise: float | Sequence[float] = 0.1,
        beta: float = 1.0,
        jitter: float = 1e-4,
        hidden_variance: bool = False,
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
                kernel, self.latent_dim, self.n_dims, lengthscale=lengthscale, outputscale=outputscale)
        else:  # a gpytorch kernel: its own initial hyperparameters
            self.kernel = GPyTorchLatentKernel(kernel, self.latent_dim, self.n_dims)
        start = torch.as_tensor(noise, dtype=torch.float64).expand(self.n_vars)
        raw_noise = (start + torch.log(-torch.expm1(-start))).to(torch.get_default_dtype())
        self.raw_noise = nn.Parameter(raw_noise)
        self.hidden_variance = bool(hidden_variance)
        # the draws behind the moments come from a generator of their own, so that keeping
        # them changes nothing else in training (a fit with hidden_variance is one without)
        self._moment_generator: torch.Generator | None = None
        # training steps seen (they seed the moments' draws): a checkpoint resumes them as they were
        self.register_buffer("moment_steps", torch.zeros((), dtype=torch.int64))
        self._steps_on_host = 0  # the same count, read without a device sync every step
        self.register_load_state_dict_post_hook(_read_moment_steps)
        # moving averages of the encoder-hidden values' squared errors, decoded spreads and count
        self.register_buffer("hidden_moments", torch.zeros(3, self.n_vars))
        # the same per pattern of the other variables seen (hidden_var_at)
        self.n_patterns = pattern_count(self.n_vars)
        self.register_buffer("pattern_moments", torch.zeros(3, self.n_vars, self.n_patterns))

    @property
    def noise_var(self) -> torch.Tensor:
        """Likelihood variance of each variable, shape (K,), standardised units."""
        return F.softplus(self.raw_noise) + _MIN_VAR

    @property
    def hidden_estimate(self) -> torch.Tensor:
        """The variance a hidden value needs on top of the decoded spread (:meth:`update_hidden_moments`).

        Shape (K,), standardised units; the likelihood variance where there is none.
        """
        sq, spread, count = self.hidden_moments
        est = _moment_estimate(sq, spread, count)
        return torch.where(count > 0, est.to(self.noise_var.dtype), self.noise_var.detach())

    @property
    def hidden_ratio(self) -> torch.Tensor:
        """How much wider the likelihood's predictive must be for values hidden from the encoder.

        ``mean((y - m)^2) / (mean(s) + sigma^2)`` over the values hidden in training, shape (K,);
        1 where there is none. The ``"scaled"`` variance of :mod:`geogpvae.engine.calibration`.
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
            Bit ``b`` of ``(i, j)`` set when the ``b``-th variable other than ``j`` is seen at ``i``;
            zeros beyond :data:`MAX_PATTERN_VARS` variables.
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

        A pattern with a count below :data:`PATTERN_MIN_COUNT` falls back on the pooled estimate.

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
            Standardised values (anything at hidden entries).
        visible : Tensor of bool, shape (M, K)
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
            The encoder posterior.
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
        """Fold one batch's encoder-hidden values into the moments behind :attr:`hidden_estimate`.

        Moment matching: ``h = mean((y - m)^2) - mean(s)``, ``m`` and ``s`` from ``n_samples``
        decoded draws (the S-sample mean's excess ``s / S`` subtracted). No gradient.

        Parameters
        ----------
        y : Tensor, shape (B, K)
        hidden : Tensor of bool, shape (B, K)
            Observed values the encoder was not shown.
        mean, var : Tensor, shape (B, L)
        n_samples : int
        visible : Tensor of bool, shape (B, K), optional
            The entries the encoder saw: also folded in per pattern (:meth:`hidden_var_at`).
        seed : int
            Of the latent draws (a generator of their own).
        """
        if not self.hidden_variance:
            return
        # no hidden values, no change: on an accelerator checked on the device (no stall)
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
        """``moments <- decay * moments + (1 - decay) * batch`` in place, unless ``keep`` is False."""
        if keep is None:
            moments.mul_(self.HIDDEN_DECAY).add_(batch, alpha=1 - self.HIDDEN_DECAY)
        else:
            moments.copy_(torch.where(keep, moments.mul(self.HIDDEN_DECAY).add(batch, alpha=1 - self.HIDDEN_DECAY),
                                      moments))

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Mini-batch ELBO terms.

        Returns
        -------
        dict
            Scalars ``loss`` (negative ELBO / N, minimised), ``expected_nll`` (per location) and
            ``kl`` (/ N, unweighted). Training also updates the hidden-value moments.
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
