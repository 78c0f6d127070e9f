"""Gaussian-process pieces, pure torch/NumPy: kernels, neighbour search, the SPA/HPA priors.

:mod:`~geogpvae.gp.names` (the option values these accept; imports nothing, so checking a
configuration needs no torch),
:mod:`~geogpvae.gp.kernels` (the built-in latent covariance functions, hand-written),
:mod:`~geogpvae.gp.user_kernels` (any stationary gpytorch kernel as a latent kernel),
:mod:`~geogpvae.gp.neighbours` (orderings and nearest-neighbour sets) and
:mod:`~geogpvae.gp.priors` (the KL terms of the two neighbour-driven priors: SPA in
:mod:`~geogpvae.gp.priors.spa`, HPA in :mod:`~geogpvae.gp.priors.hpa`).
"""
