"""The engine: plain arrays in, plain arrays out, no xarray.

:mod:`~geogpvae.engine.config` (:class:`~geogpvae.engine.config.GPVAEConfig`, the one source
of the defaults), :mod:`~geogpvae.engine.core` (:class:`~geogpvae.engine.core.GPVAEEngine`:
checks, scaling, fit, predict, save/load), :mod:`~geogpvae.engine.model` (the encoder,
decoder and the ELBO), :mod:`~geogpvae.engine.training` (batches and the training loop),
:mod:`~geogpvae.engine.calibration` (the variance calibration after training) and
:mod:`~geogpvae.engine.predict` (latent posteriors and predictive moments).
"""
