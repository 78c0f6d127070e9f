"""The engine: plain arrays in, plain arrays out, no xarray.

A map of its modules, in the order a fit goes through them:

* :mod:`~geogpvae.engine.config`: :class:`~geogpvae.engine.config.GPVAEConfig`, the one source
  of the defaults;
* :mod:`~geogpvae.engine.core`: :class:`~geogpvae.engine.core.GPVAEEngine`, which runs the
  steps below (checks, scaling, fit, calibration, predict);
* :mod:`~geogpvae.engine.inputs`: checks of the inputs and their standardisation;
* :mod:`~geogpvae.engine.threads`: how many CPU threads torch may use;
* :mod:`~geogpvae.engine.nugget`: a starting likelihood variance from the variogram;
* :mod:`~geogpvae.engine.model`: the encoder, the decoder, the latent prior and the ELBO;
* :mod:`~geogpvae.engine.data`: the field's tensors (neighbour sets, context, mini-batches);
* :mod:`~geogpvae.engine.training`: the training loop, with
  :mod:`~geogpvae.engine.batches` (each epoch's mini-batches, planned on the host) and
  :mod:`~geogpvae.engine.adam` (the optimiser);
* :mod:`~geogpvae.engine.holdout`: which observed values a fit holds out to score itself,
  and :mod:`~geogpvae.engine.check_values`: those values as tensors, and their score;
* :mod:`~geogpvae.engine.selection`: the KL weight chosen from them (``beta="auto"``);
* :mod:`~geogpvae.engine.metric`: neighbours re-selected with the learnt lengthscales;
* :mod:`~geogpvae.engine.posterior`: the trained model's posterior at target locations
  (:class:`~geogpvae.engine.posterior.Posterior`), built on :mod:`~geogpvae.engine.targets`
  and :mod:`~geogpvae.engine.predict` (latent posteriors, predictive moments);
* :mod:`~geogpvae.engine.calibration`: the variance calibration after training, scored on
  the posterior, returned as a :class:`~geogpvae.engine.calibration.Calibration`;
* :mod:`~geogpvae.engine.same_field`: the training field recognised in another row order or
  through float32, so that it gets the fitted posterior back;
* :mod:`~geogpvae.engine.state`: saving and restoring a fitted engine;
* :mod:`~geogpvae.engine.progress`: progress bars of the long stages.
"""
