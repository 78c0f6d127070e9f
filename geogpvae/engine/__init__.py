"""The engine: plain arrays in, plain arrays out, no xarray.

:class:`~geogpvae.engine.core.GPVAEEngine` runs a fit (checks, scaling, training, calibration,
prediction) with the defaults of :class:`~geogpvae.engine.config.GPVAEConfig`; the other modules
hold its steps.
"""
