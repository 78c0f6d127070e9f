"""Gaussian-process pieces, pure torch/NumPy: kernels, neighbour search, the SPA/HPA priors.

:mod:`~geogpvae.gp.names` (option values, imports nothing), :mod:`~geogpvae.gp.kernels` (built-in
latent kernels), :mod:`~geogpvae.gp.user_kernels` (gpytorch kernels), :mod:`~geogpvae.gp.neighbours`
(orderings, neighbour sets) and :mod:`~geogpvae.gp.priors` (the KL terms of SPA and HPA).
"""
