"""Mutation check of the ELBO tests: break the code on purpose and confirm a test fails.

Not collected by pytest. Run from the repository root::

    python tests/engine/mutants.py            # every mutant against tests/engine/test_elbo.py
    python tests/engine/mutants.py tests/     # against the whole suite (slow)
    python tests/engine/mutants.py -k selection tests/engine/test_selection.py   # beta="auto"
    python tests/engine/mutants.py -k kernel tests/gp/test_kernels.py tests/test_api.py
    python tests/engine/mutants.py -k scaled tests/engine/test_elbo.py tests/engine/test_core.py
    python tests/engine/mutants.py -k holdout tests/engine/test_holdout.py tests/engine/test_stopping.py tests/engine/test_calibration.py
    python tests/engine/mutants.py -k "context hiding" tests/engine/test_training.py tests/engine/test_selection.py
    python tests/engine/mutants.py -k "prior blocks" tests/gp/test_priors.py
    python tests/engine/mutants.py -k "rows:" tests/gp/test_rows.py
    python tests/engine/mutants.py -k "selection share" tests/engine/test_selection.py
    python tests/engine/mutants.py -k "calibration partition" tests/engine/test_calibration.py
    python tests/engine/mutants.py -k "device:" tests/engine/test_device.py
    python tests/engine/mutants.py -k "state:" tests/engine/test_state.py
    python tests/engine/mutants.py -k "layout:" tests/engine/test_training.py
    python tests/engine/mutants.py -k "batches:" tests/engine/test_batches.py tests/engine/test_device.py
    python tests/engine/mutants.py -k "neighbours:" tests/gp/test_neighbours.py
    python tests/engine/mutants.py -k "inputs:" tests/engine/test_inputs.py tests/test_bad_input.py
    python tests/engine/mutants.py -k "userpass:" tests/test_api.py tests/test_bad_input.py tests/cli/test_commands.py tests/cli/test_text.py tests/fields/test_io.py
    python tests/engine/mutants.py -k "pass18:" tests/engine/test_selection.py tests/engine/test_config.py tests/cli/test_commands.py tests/cli/test_text.py tests/test_bad_input.py tests/engine/test_inputs.py tests/test_api.py tests/plot/test_figures.py tests/engine/test_state.py tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass19:" tests/cli/test_commands.py tests/plot/test_figures.py tests/engine/test_same_field.py tests/test_api.py  # or their new tests alone
    python tests/engine/mutants.py -k "pass20:" tests/fields/test_packing.py tests/fields/test_valid.py tests/test_api.py tests/fields/test_stacking.py tests/test_bad_input.py tests/engine/test_progress.py tests/cli/test_commands.py tests/test_validation.py
    python tests/engine/mutants.py -k "pass21:" tests/engine/test_core.py tests/engine/test_calibration.py tests/cli/test_text.py tests/fields/test_stacking.py tests/plot/test_figures.py
    python tests/engine/mutants.py -k "pass22:" tests/engine/test_calibration.py tests/engine/test_selection.py tests/cli/test_commands.py tests/fields/test_packing.py tests/fields/test_stacking.py tests/plot/test_figures.py tests/plot/test_layout.py
    python tests/engine/mutants.py -k "pass23:" tests/fields/test_packing.py tests/cli/test_commands.py tests/engine/test_progress.py tests/plot/test_figures.py tests/fields/test_valid.py tests/fields/test_stacking.py tests/fields/test_scales.py
    python tests/engine/mutants.py -k "pass24: mask hint" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass24: placeholder" tests/fields/test_placeholders.py tests/plot/test_figures.py tests/test_api.py::test_impute_warns_of_nemo_placeholder_cells_and_keeps_observed_values
    python tests/engine/mutants.py -k "pass24: budget" tests/engine/test_config.py
    python tests/engine/mutants.py -k "pass24: title" tests/plot/test_figures.py
    python tests/engine/mutants.py -k "pass24: two-fill" tests/cli/test_commands.py
    python tests/engine/mutants.py -k "pass24: map hint" tests/cli/test_commands.py
    python tests/engine/mutants.py -k "pass25: short budget" tests/engine/test_config.py tests/engine/test_core.py::test_resume_from_checkpoint_matches_uninterrupted_run
    python tests/engine/mutants.py -k "pass25: demo" tests/cli/test_commands.py::test_demo_scores_and_writes
    python tests/engine/mutants.py -k "pass25: info" tests/cli/test_commands.py::test_info_describes_variables_coordinates_and_memory
    python tests/engine/mutants.py -k "pass25: short budget in" tests/cli/test_commands.py::test_a_short_budget_is_warned_about_in_the_command_s_words
    python tests/engine/mutants.py -k "pass25: one" tests/plot/test_figures.py
    python tests/engine/mutants.py -k "pass25: rotated" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass25: training locations" tests/engine/test_same_field.py tests/test_api.py::test_predict_warns_when_every_location_is_far_from_the_training_data
    python tests/engine/mutants.py -k "pass25: latent cap" tests/engine/test_predict.py tests/engine/test_core.py::test_the_latent_cap_reaches_the_neighbours_conditional_by_default
    python tests/engine/mutants.py -k "pass25: layers in" tests/cli/test_commands.py::test_layers_of_a_curvilinear_grid_say_how_to_draw_a_map
    python tests/engine/mutants.py -k "pass25: a rotated" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass25: a picked" tests/plot/test_figures.py tests/cli/test_commands.py::test_plot_isel_of_one_station_draws_its_series
    python tests/engine/mutants.py -k "pass25 userpass: 2-D coordinate" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass25 userpass: colour bar" tests/plot/test_layout.py
    python tests/engine/mutants.py -k "pass25 userpass: profile" tests/plot/test_figures.py
    python tests/engine/mutants.py -k "pass25 userpass: map title" tests/plot/test_figures.py
    python tests/engine/mutants.py -k "pass25 userpass2: clipping" tests/fields/test_valid.py
    python tests/engine/mutants.py -k "pass25 userpass2: polar" tests/plot/test_figures.py::test_field_map_sea_ice_grid_around_a_pole_gets_a_polar_map
    python tests/engine/mutants.py -k "pass25 userpass3: a grid far" tests/test_api.py::test_predict_warns_when_every_location_is_far_from_the_training_data
    python tests/engine/mutants.py -k "pass25 userpass3: predicted coordinates" tests/test_api.py::test_predict_gives_unlabelled_coordinates_the_training_units
    python tests/engine/mutants.py -k "pass26 userpass: a table's" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass26 userpass: the command shows" tests/cli/test_text.py
    python tests/engine/mutants.py -k "pass26 userpass: detection-limit" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass26 userpass: blank" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass26 userpass: no advice" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass26 userpass: a scattered" tests/fields/test_stacking.py
    python tests/engine/mutants.py -k "pass26 userpass: the command shows coords=['lon', 'lat', 'depth_cm']" tests/cli/test_text.py
    python tests/engine/mutants.py -k "pass27" tests/engine/test_core.py
    python tests/engine/mutants.py -k "pass27: rule 14" tests/engine/test_calibration.py
    python tests/engine/mutants.py -k "pass27: a shrink" tests/engine/test_core.py
    python tests/engine/mutants.py -k "pass27 helper: one map" tests/plot/test_figures.py::test_one_map_searches_a_grid_for_placeholder_cells_once
    python tests/engine/mutants.py -k "pass27 helper: the placeholder" tests/plot/test_figures.py::test_one_map_searches_a_grid_for_placeholder_cells_once
    python tests/engine/mutants.py -k "pass27 helper: a" tests/plot/test_figures.py::test_polar_map_is_framed_by_its_data
    python tests/engine/mutants.py -k "pass28:" tests/engine/test_memorisation.py tests/engine/test_selection.py::test_the_check_share_is_a_tenth_unless_an_experiment_sets_it_for_whole_field_fits
    python tests/engine/mutants.py -k "pass28 helper" tests/plot/test_figures.py::test_polar_map_of_a_sea_ice_grid_follows_the_grid_s_orientation
    python tests/engine/mutants.py -k "pass28 helper2" tests/plot/test_figures.py
    python tests/engine/mutants.py -k "pass29:" tests/engine/test_members.py tests/cli/test_commands.py::test_a_stop_in_the_second_member_resumes_it_where_it_stood tests/cli/test_commands.py::test_a_signal_in_the_second_model_stops_it_without_announcing_the_end
    python tests/engine/mutants.py -k "pass30: a stop" tests/cli/test_commands.py::test_a_signal_before_the_first_epoch_stops_after_it_with_a_checkpoint
    python tests/engine/mutants.py -k "pass30 maps:" tests/plot/test_figures.py
    python tests/engine/mutants.py -k "pass31:" tests/engine/test_memorisation.py tests/engine/test_stopping.py
    python tests/engine/mutants.py -k "pass31 polar:" tests/plot/test_polar.py
    python tests/engine/mutants.py -k "pass31 beside:" tests/plot/test_figures.py
    python tests/engine/mutants.py -k "pass31 variables:" tests/fields/test_stacking.py tests/cli/test_text.py

Each mutant is applied to a scratch copy of the checkout (the working tree is never
touched); the script prints CAUGHT with the failing tests, or SURVIVED.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# name: (file, original text, broken text)
MUTANTS = {
    "likelihood over missing entries": (
        "geogpvae/engine/model.py", "(logpdf * observed.to(y.dtype)).sum(-1)", "logpdf.sum(-1)"),
    "SPA KL scaled by 1/N": (
        "geogpvae/gp/priors/spa.py", "        return kl.mean()\n", "        return kl.mean() / batch.n_total\n"),
    "HPA KL not divided by N": (
        "geogpvae/gp/priors/hpa.py", "return kl.mean() / batch.n_total", "return kl.mean()"),
    "log(2 pi s2) dropped": ("geogpvae/engine/model.py", " + torch.log(2 * math.pi * noise))", ")"),
    "KL sign flipped": (
        "geogpvae/engine/model.py", "expected_nll + self.beta * kl_per_location", "expected_nll - self.beta * kl_per_location"),
    "encoder sees missing values": ("geogpvae/engine/model.py", "parts = [y * mask, mask]", "parts = [y, mask]"),
    "tree path: point its own earlier neighbour": (
        "geogpvae/gp/neighbours.py", "earlier = (idx < rows[:, None])", "earlier = (idx <= rows[:, None])"),
    "dense prefix: point its own earlier neighbour": (
        "geogpvae/gp/neighbours.py", "d2[np.triu_indices(p0)] = np.inf", "d2[np.triu_indices(p0, 1)] = np.inf"),
    "SPA KL: b'Sb dropped": (
        "geogpvae/gp/priors/spa.py", "spread = (weights.square() * var_n).sum(-1)",
        "spread = 0.0 * (weights.square() * var_n).sum(-1)"),
    "predict: anchors' noise dropped": (
        "geogpvae/engine/predict.py", "nbr_noise=noise[safe].mT,", "nbr_noise=None,"),
    "predict: encoder means instead of pseudo-observations": (
        "geogpvae/engine/predict.py", "(w * pseudo[safe].mT)", "(w * mean_anchor[safe].mT)"),
    "predict: natural mean not damped near the prior": (
        "geogpvae/engine/predict.py", "torch.clamp(f / floor, 0.0, 1.0)", "1.0"),
    "predict: anchor kept in its own set": (
        "geogpvae/engine/predict.py", "drop = np.where(is_self.any(1), is_self.argmax(1), kq - 1)",
        "drop = np.full(m, kq - 1)"),
    "predictive: likelihood noise dropped": (
        "geogpvae/engine/predict.py", "v_model = comp.var(0, unbiased=False) + nz", "v_model = comp.var(0, unbiased=False)"),
    "predictive: latent spread dropped": (
        "geogpvae/engine/predict.py", "dec = _decode(model, mu + v.sqrt() * eps)", "dec = _decode(model, mu + 0.0 * eps)"),
    "predictive: per-location variance scale not squared": (
        "geogpvae/engine/predict.py", "noise = hidden_var.detach().to(f64) * scale_t.square()",
        "noise = hidden_var.detach().to(f64) * scale_t"),
    "predictive: per-location variance not chunked": (
        "geogpvae/engine/predict.py", "nz = noise if noise.dim() == 1 else noise[s : s + chunk]",
        "nz = noise if noise.dim() == 1 else noise[:chunk]"),
    "predictive: scale not squared": (
        "geogpvae/engine/predict.py", "noise = model.hidden_var.detach().to(f64) * scale_t.square()",
        "noise = model.hidden_var.detach().to(f64) * scale_t"),
    "hidden variance: spread not subtracted": (
        "geogpvae/engine/model.py", "return ((sq - spread) / count", "return ((sq) / count"),
    "hidden variance: fed from every observed value": (
        "geogpvae/engine/model.py", "hidden = batch.observed[pos] & ~batch.visible[pos]", "hidden = batch.observed[pos]"),
    "hidden variance: Monte Carlo correction dropped": (
        "geogpvae/engine/model.py", "sq = (y - centre).square() - spread / n_samples", "sq = (y - centre).square()"),
    "hidden variance: pattern coded with the variable's own bit": (
        "geogpvae/engine/model.py", "above = code >> (j + 1)", "above = code >> j"),
    "hidden variance: pattern moments from every observed value": (
        "geogpvae/engine/model.py", "parts = torch.stack([sq * mask, spread * mask, mask])",
        "parts = torch.stack([sq, spread, torch.ones_like(mask)])"),
    "hidden variance: pattern threshold ignored": (
        "geogpvae/engine/model.py", "count[var_j, idx] >= PATTERN_MIN_COUNT", "count[var_j, idx] >= 0"),
    "noise choice: no margin over the held-out noise": (
        "geogpvae/engine/calibration.py", "return gain > max(margin * se, 1e-6)", "return gain > 0"),
    "noise choice: one variable's choice taken for all": (
        "geogpvae/engine/calibration.py", "chosen[r][j] = noises[min(fit, key=lambda i: (abs(np.log(nlls[i][0][0])), i))]",
        "chosen[r] = [noises[min(fit, key=lambda i: (abs(np.log(nlls[i][0][0])), i))]] * k"),
    "noise choice: the first variance whatever the factors": (
        "geogpvae/engine/calibration.py", "key=lambda i: (abs(np.log(nlls[i][0][0])), i))]", "key=lambda i: i)]"),
    "noise choice: the first variance kept outside the band": (
        "geogpvae/engine/calibration.py", "abs(np.log(nlls[0][0][0])) <= np.log(FACTOR_BAND)",
        "abs(np.log(nlls[0][0][0])) <= np.log(100 * FACTOR_BAND)"),
    "noise choice: no band": (
        "geogpvae/engine/calibration.py", "if rule == \"band\" and 0 in fit", "if False and 0 in fit"),
    "noise choice: a clearly worse variance admitted": (
        "geogpvae/engine/calibration.py", "if i == best or not clearly_better(", "if i == best or clearly_better("),
    "noise choice: the source chosen with every variance": (
        "geogpvae/engine/calibration.py", "sources = {r: c.partition(\"|\")[0] for r, c in first.items()}",
        "sources = {r: c.partition(\"|\")[0] for r, c in chosen.items()}"),
    "noise: calibration shortcut drops the scale": (
        "geogpvae/engine/calibration.py", "shift.detach().cpu().double().numpy() * (engine.scale / sm_base) ** 2",
        "shift.detach().cpu().double().numpy() / sm_base**2"),
    "noise: per-variable choice applied to the wrong column": (
        "geogpvae/engine/predict.py", "torch.stack([cols[c][:, j] for j, c in enumerate(kinds)], dim=1)",
        "torch.stack([cols[c][:, 0] for j, c in enumerate(kinds)], dim=1)"),
    "hidden variance: predictive adds the likelihood variance": (
        "geogpvae/engine/predict.py", "noise = model.hidden_var.detach()", "noise = model.noise_var.detach()"),
    "selection: check values kept in training": (
        "geogpvae/engine/training.py", "        observed = observed & ~check\n", "\n"),
    "selection: worst candidate kept": (
        "geogpvae/engine/selection.py", "score < best.scores[best.factor]", "score > best.scores[best.factor]"),
    "selection: last candidate carries on": (
        "geogpvae/engine/selection.py", "best.factor, best.model, best.state = factor, model, state",
        "best.factor = factor\n            best.model, best.state = model, state"),
    "selection: check values not given back": (
        "geogpvae/engine/core.py", "            self._data = self._without_check(x, y, observed)\n        return chosen",
        "            pass\n        return chosen"),
    "selection: scored on live, not averaged, weights": (
        "geogpvae/engine/selection.py", "        core.load_state_dict({**live, **state.average})", "        pass"),
    "kernel: lengthscale learnt in coordinate units": (
        "geogpvae/gp/kernels.py", 'self.register_buffer("lengthscale_unit", ls.clone())',
        'self.register_buffer("lengthscale_unit", torch.ones_like(ls))'),
    "holdout: check score ignores the task weights": (
        "geogpvae/engine/stopping.py", "    if check.weights is None:\n", "    if True:\n"),
    "holdout: weights from the observed, not the missing, counts": (
        "geogpvae/engine/holdout.py", "missing = (~observed).sum(0)", "missing = observed.sum(0)"),
    "holdout: never-imputed variables also held out": (
        "geogpvae/engine/holdout.py", "scored = task_weights(observed) > 0", "scored = task_weights(observed) >= 0"),
    "holdout: random, not gap-shaped, check values": (
        "geogpvae/engine/holdout.py", "        if gaps.size == 0 or (shaped is not None and not shaped[j]):",
        "        if True:"),
    "holdout: gaps judged clustered without the chance comparison": (
        "geogpvae/engine/holdout.py", "out[j] = actual > _deep_share(x, rng.permutation(missing), d_loc, backend) + margin",
        "out[j] = True"),
    "holdout: unclustered variables shaped too": (
        "geogpvae/engine/holdout.py", "if gaps.size == 0 or (shaped is not None and not shaped[j]):",
        "if gaps.size == 0:"),
    "scaled variance: ratio inverted": (
        "geogpvae/engine/model.py", "ratio = sq.clamp_min(0) / (spread + lik * count).clamp_min(1e-30)",
        "ratio = (spread + lik * count) / sq.clamp_min(1e-30)"),
    "scaled variance: spread left out of the ratio": (
        "geogpvae/engine/model.py", "ratio = sq.clamp_min(0) / (spread + lik * count).clamp_min(1e-30)",
        "ratio = sq.clamp_min(0) / (lik * count).clamp_min(1e-30)"),
    "scaled variance: predicted unscaled": (
        "geogpvae/engine/core.py", "vf = scales[regime] if vf is None else vf * scales[regime]", "pass"),
    "scaled variance: scored with the ratio's square root twice": (
        "geogpvae/engine/calibration.py", "sm = sm * np.sqrt(variance_scale(engine.model, \"scaled\"))",
        "sm = sm * variance_scale(engine.model, \"scaled\")"),
    "holdout: calibration ignores the shaped values": (
        "geogpvae/engine/calibration.py", "if values is None else observed & values", "if True else observed & values"),
    "holdout: a location counts as its own nearest location": (
        "geogpvae/engine/holdout.py", "d_loc, _ = knn(x, 1, exclude_self=True, backend=backend)",
        "d_loc, _ = knn(x, 1, exclude_self=False, backend=backend)"),
    "prior blocks: padded slots left coupled": (
        "geogpvae/gp/priors/_blocks.py", "return torch.where(pair, cov, eye)", "return cov"),
    "prior blocks: a padded slot's own row decoupled but not its column": (
        "geogpvae/gp/priors/_blocks.py", "pair = (valid.unsqueeze(-1) & valid.unsqueeze(-2)).unsqueeze(1)",
        "pair = valid.unsqueeze(-1).expand(*valid.shape, valid.shape[-1]).unsqueeze(1)"),
    "calibration partition: random draws again": (
        "geogpvae/engine/calibration.py", "shaped = groups == r if not clustered else matched_entries(",
        "shaped = None if not clustered else matched_entries("),
    "calibration partition: the same group every round": (
        "geogpvae/engine/calibration.py", "shaped = groups == r if not clustered else matched_entries(",
        "shaped = groups == 0 if not clustered else matched_entries("),
    "selection share: 35 % on whole-field fits too": (
        "geogpvae/engine/selection.py", "return WHOLE_FIELD_SELECTION_SHARE if whole else SELECTION_SHARE",
        "return SELECTION_SHARE"),
    "selection share: the fit ignores it": (
        "geogpvae/engine/core.py", "selection_epochs(budget, selection_share(cfg, n))",
        'selection_epochs(budget, cfg.extra.get("selection_share", 0.35))'),
    "rows: advanced indexing on the CPU (unordered gradient sums)": (
        "geogpvae/gp/rows.py", 'if t.device.type != "cpu":', "if True:"),
    "context hiding: hidden values' sum left in": (
        "geogpvae/engine/training.py", "total = mean * count - removed[:, k:]", "total = mean * count"),
    "context hiding: fractions not lowered": (
        "geogpvae/engine/training.py", "parts += [torch.where(left > 0, total / left.clamp_min(1.0), 0.0), left / size]",
        "parts += [torch.where(left > 0, total / left.clamp_min(1.0), 0.0), count / size]"),
    "context hiding: batch rows mapped to the wrong encoded rows": (
        "geogpvae/engine/training.py", "where[uniq] = torch.arange(u, device=uniq.device)",
        "where[uniq] = torch.arange(u, device=uniq.device).flip(0)"),
    "context hiding: clustered variables hidden, the others not": (
        "geogpvae/engine/core.py", "else ~self.clustered_gaps_", "else self.clustered_gaps_"),
    "context hiding: the share ignored (every hidden value leaves)": (
        "geogpvae/engine/training.py", "        if data.context_hiding_share < 1:\n", "        if False:\n"),
    "context hiding: with mini-batches too": (
        "geogpvae/engine/core.py", "hiding = False if hiding == \"auto\" and cfg.batch_for(n) < n else hiding",
        "hiding = hiding"),
    "context hiding: never applied": (
        "geogpvae/engine/training.py", "if mask_rate > 0 and data.context_hiding is not None and context is not None:",
        "if False:"),
    "device: packed plan, valid slots read from the clamped index": (
        "geogpvae/engine/batches.py", '    out["valid"] = out["safe"] >= 0', '    out["valid"] = out["safe"] > 0'),
    "device: packed plan, every tensor unpacked from the start": (
        "geogpvae/engine/batches.py", "        start += v.numel()", "        start += 0"),
    "device: packed plan, a tensor held under two names copied twice": (
        "geogpvae/engine/batches.py", "        if id(v) in first:\n", "        if False:\n"),
    "device: auto sends whole-field fits to the GPU": (
        "geogpvae/engine/core.py", "and self.config.batch_for(n) >= n", "and self.config.batch_for(n) > n"),
    "device: moments decayed by a batch with nothing hidden (accelerator path)": (
        "geogpvae/engine/model.py", "moments.copy_(torch.where(keep, moments.mul(", "moments.copy_(torch.where(True, moments.mul("),
    "neighbours: the median's subsample counts the location itself": (
        "geogpvae/gp/neighbours.py", "dist, _ = knn(x, k + 1, query=x[:: -(-n // max_queries)], backend=backend)",
        "dist, _ = knn(x, k, query=x[:: -(-n // max_queries)], backend=backend)"),
    "batches: the marked unique's inverse one row off": (
        "geogpvae/engine/batches.py", "    return uniq, rank[values] - 1\n", "    return uniq, rank[values]\n"),
    "batches: the marked unique's table one short": (
        "geogpvae/engine/batches.py", "    mark = torch.zeros(size, dtype=torch.int64)", "    mark = torch.zeros(size - 1, dtype=torch.int64)"),
    "layout: scattered mini-batches drawn at random (before rule 11)": (
        "geogpvae/engine/training.py", 'batching = "spatial" if lattice or config.batch_for(x.shape[0]) < x.shape[0] else "random"',
        'batching = "spatial" if lattice else "random"'),
    "layout: whole-field steps on scattered locations reordered": (
        "geogpvae/engine/training.py", 'batching = "spatial" if lattice or config.batch_for(x.shape[0]) < x.shape[0] else "random"',
        'batching = "spatial"'),
    "state: a newer version's state accepted": (
        "geogpvae/engine/state.py", 'if int(state.get("version", 0)) > STATE_VERSION:', "if False:"),
    "inputs: spread of tiny or huge values computed in their own units": (
        "geogpvae/engine/inputs.py", "unit = size if 0 < size < np.inf else 1.0", "unit = 1.0"),
    "inputs: outliers that flatten the rest admitted": (
        "geogpvae/engine/inputs.py", "if 0 < typical < MIN_SPREAD_RATIO * sd[j]:", "if False:"),
    "inputs: a constant variable's gaps left to the model": (
        "geogpvae/engine/core.py", "        if fixed.any():  # a constant variable", "        if False:  # a constant variable"),
    "inputs: moments of far units computed in them": (
        "geogpvae/engine/predict.py", "    return np.where(far, unit, 1.0)", "    return np.ones_like(unit)"),
    "inputs: calibration's added variance squared in the variable's units": (
        "geogpvae/engine/calibration.py", "sm = sm_base * np.sqrt(1.0 + shift.detach().cpu().double().numpy() * (engine.scale / sm_base) ** 2)",
        "sm = np.sqrt(sm_base**2 + shift.detach().cpu().double().numpy() * engine.scale**2)"),
    "inputs: a log variable's spread squared in its units": (
        "geogpvae/engine/predict.py", "sd_out = torch.where(log_t, torch.exp(log_sd), sd_out)",
        "sd_out = torch.where(log_t, torch.exp(2.0 * log_sd).sqrt(), sd_out)"),
    "inputs: new locations' units not checked": (
        "geogpvae/fields/geometry.py", "        _check_units(source, axis)\n", "\n"),
    "userpass: a job array's earlier outputs kept among its inputs": (
        "geogpvae/cli/impute.py", "files = drop_own_outputs(expand_inputs(settings.inputs), settings.output)",
        "files = expand_inputs(settings.inputs)"),
    "userpass: links and pipes replaced by an output": (
        "geogpvae/_files.py", "    if target.is_symlink():", "    if False:"),
    "userpass: an imputed output imputed again": (
        "geogpvae/fields/cf.py", "and bool((ds[f\"{n}{IMPUTED_SUFFIX}\"] == 1).any())]", "and False]"),
    "userpass: a user's own v_std replaced": (
        "geogpvae/api.py", "if f\"{n}{STD_SUFFIX}\" in ds.variables and", "if False and"),
    "userpass: a saved time origin left a numpy string": (
        "geogpvae/fields/geometry.py", 'return str(np.datetime_as_string(valid.min().astype("datetime64[ns]"), unit="ns")), None',
        'return np.datetime_as_string(valid.min().astype("datetime64[ns]"), unit="ns"), None'),
    "userpass: one observed value held constant": (
        "geogpvae/engine/core.py", "MIN_CONSTANT_VALUES = 3", "MIN_CONSTANT_VALUES = 1"),
    "inputs: a dim's string labels read as its coordinate": (
        "geogpvae/fields/geometry.py", 'source = source.drop_vars(axis.names[0], errors="ignore")', "pass"),
    "pass18: a stop asked after a candidate's last epoch ignored": (
        "geogpvae/engine/selection.py", "if (state.done and stop()) or asked or (state.epoch < epochs and not state.done):",
        "if (state.done and stop()) or (state.epoch < epochs and not state.done):"),
    "pass18: unknown extra keys accepted": (
        "geogpvae/engine/config.py", "        if unknown:\n            import difflib", "        if False:\n            import difflib"),
    "pass18: a flag and its --option silently disagree": (
        "geogpvae/cli/settings.py", "if name in top and top[name] != lifted[name]:", "if False:"),
    "pass18: any iterable taken as layer widths": (
        "geogpvae/engine/config.py", "    ok = isinstance(value, (list, tuple)) and all(",
        "    value = [int(v) for v in value]\n    ok = isinstance(value, (list, tuple)) and all("),
    "pass18: CLI messages keep the library's argument names": (
        "geogpvae/cli/common.py", "        text = pattern.sub(flag, text)", "        pass"),
    "pass18: a possible missing-value code warned wherever it lies": (
        "geogpvae/engine/inputs.py", "min(abs(c - low), abs(c - high)) > spread]", "min(abs(c - low), abs(c - high)) >= 0]"),
    "pass18: missing-value codes counted among the other values": (
        "geogpvae/engine/inputs.py", "        rest = v[~is_code]\n", "        rest = v\n"),
    "pass18: 9 and 99 taken for missing-value codes": (
        "geogpvae/engine/inputs.py", "for k in range(3, 10)]", "for k in range(1, 10)]"),
    "pass18: a log transform proposed for variables with zeros": (
        "geogpvae/fields/stacking.py", "v.size >= 10 and v.min() > 0:", "v.size >= 10 and v.min() >= 0:"),
    "pass18: a log transform proposed though the user chose none": (
        "geogpvae/fields/stacking.py", "and n not in chosen_by_user]", "]"),
    "pass18: slices along a dim without coordinates taken as the same locations": (
        "geogpvae/fields/stacking.py", "        check_spanned(ds, geometry, dims, shape, trained_dims)\n", "        pass\n"),
    "pass18: a training field's own unspanned dim refused": (
        "geogpvae/fields/geometry.py", "        if dim not in trained_dims:", "        if True:"),
    "pass18: a scalar coordinate not broadcast": (
        "geogpvae/fields/geometry.py", "    if var.ndim == 0:  # a scalar", "    if False:  # a scalar"),
    "pass18: a truth paired with the field by position": (
        "geogpvae/plot/conventions.py", "    truth = _matched(truth, like)\n", "\n"),
    "pass18: predict ignores a Dataset variable's dim order": (
        "geogpvae/fields/stacking.py", "template = next((source[v] for v in names if set(found) <= set(map(str, source[v].dims))), None)",
        "template = None"),
    "pass18: NumPy seeds kept as NumPy integers": (
        "geogpvae/engine/config.py", "                setattr(self, f.name, value.item())", "                pass"),
    "pass18: the profile band in linear units for log variables": (
        "geogpvae/plot/profiles.py", "    if not is_log_variable(f.value):\n", "    if True:\n"),
    "pass18: a profile drawn in stored order": (
        "geogpvae/plot/profiles.py", 'order = np.argsort(where, kind="stable")', "order = np.arange(len(where))"),
    "pass18: a saved model forgets which gaps cluster": (
        "geogpvae/engine/state.py", '        "clustered_gaps": [bool(c) for c in eng.clustered_gaps_],\n', ""),
    "pass19: --skip-existing skips any file at OUT": (
        "geogpvae/cli/impute.py", "        if reason is not None:\n            raise UsageError(",
        "        if False:\n            raise UsageError("),
    "pass19: a foreign NetCDF file taken for a finished output": (
        "geogpvae/cli/files.py", 'if "geogpvae_version" not in nc.ncattrs():', "if False:"),
    "pass19: an all-NaN field drawn as empty panels": (
        "geogpvae/plot/conventions.py", 'self.value.dtype.kind in "fc" and not np.isfinite', 'False and not np.isfinite'),
    "pass19: an empty slice drawn as empty panels": (
        "geogpvae/plot/maps.py", '    if not panels["imputed"].count():\n', "    if False:\n"),
    "pass19: the training field matched without its values": (
        "geogpvae/engine/same_field.py", "    return rows if _columns_agree(ref_values[rows], values, vtol, rtol) else None",
        "    return rows"),
    "pass19: repeated locations matched to one row": (
        "geogpvae/engine/same_field.py", " or np.unique(rows).size != len(rows):", ":"),
    "pass19: float32 copies not recognised": (
        "geogpvae/engine/same_field.py", "SAME_FIELD_RTOL = 1e-6", "SAME_FIELD_RTOL = 1e-9"),
    "pass19: a recognised copy given the training rows in their own order": (
        "geogpvae/api.py", "return self.engine_.predict().take(rows)", "return self.engine_.predict()"),
    "pass19: a location off by more than the tolerance matched": (
        "geogpvae/engine/same_field.py", "distance_upper_bound=1.0)", "distance_upper_bound=1e9)"),
    "pass19: a regional curvilinear grid drawn as points": (
        "geogpvae/plot/maps.py", "if found is not None and found.mesh is None:", "if found is not None:"),
    "pass19: a global curvilinear grid drawn as cells across its seam": (
        "geogpvae/plot/curvilinear.py", "for a in (0, 1)) >= 90.0:", "for a in (0, 1)) >= 1e9:"),
    "pass19: outer corners of a curvilinear grid at its outer centres": (
        "geogpvae/plot/style.py", 'mode="reflect", reflect_type="odd")', 'mode="edge")'),
    "pass19: curvilinear longitudes not brought onto one arc": (
        "geogpvae/plot/curvilinear.py", "    h = middle + np.mod(h - middle + 180.0, 360.0) - 180.0\n", ""),
    "pass19: plot layers along z by default whatever the dims": (
        "geogpvae/cli/plot.py", 'if "z" in da.dims or da.ndim < 3:', "if True:"),
    "pass19: files that disagree on what is not joined are joined silently": (
        "geogpvae/fields/joining.py", "if name in other.variables and not _same(", "if False and not _same("),
    "pass19: a variable missing from some joined files not warned about": (
        "geogpvae/fields/joining.py", "        if lacking:\n", "        if False:\n"),
    "pass19: files joined out of order not warned about": (
        "geogpvae/fields/joining.py", "if index.size > 1 and not (", "if False and not ("),
    "pass19: numbers taken for dates": (
        "geogpvae/fields/geometry.py", "if wanted is not None and dtype.kind in wanted[0]:", "if False:"),
    "pass19: dates taken for numbers": (
        "geogpvae/fields/geometry.py", 'if axis.kind in ("linear", "index") and (dtype.kind in "mM" or', 'if False and (dtype.kind in "mM" or'),
    "pass19: radians taken for degrees": (
        "geogpvae/fields/geometry.py", "        _check_degrees(source, axis.names)\n", ""),
    "pass19: a closed pipe reported as an error": (
        "geogpvae/cli/dispatch.py", "    except BrokenPipeError:  #", "    except ZeroDivisionError:  #"),
    "pass19: an isel key that names no dim to slice ignored": (
        "geogpvae/plot/maps.py", "    if unknown:\n        drawn = ", "    if False:\n        drawn = "),
    "pass19: a series called scattered by info": (
        "geogpvae/cli/info.py", "if len(dims) == 1 and any(c != dims[0] for c, _ in chosen) else", "if len(dims) == 1 else"),
    "pass19: --isel not handed to the map": (
        "geogpvae/cli/plot.py", "truth=truth, isel=args.isel, outline_holes=", "truth=truth, outline_holes="),
    "pass19: torchrun workers each take all of their SLURM task's cores": (
        "geogpvae/engine/threads.py", 'keys = ("LOCAL_WORLD_SIZE",) if slurm is not None else', "keys = () if slurm is not None else"),
    "pass19: torchrun workers capped by SLURM_CPUS_PER_TASK before sharing": (
        "geogpvae/engine/threads.py", "    if slurm is not None:  # at most the cores of one SLURM task\n        cores = min(cores, slurm)",
        "    if slurm is not None:  # at most the cores of one SLURM task\n        cores = min(cores, slurm) // max(1, _positive_int(env.get('LOCAL_WORLD_SIZE')) or 1)"),
    "pass19: a scalar coordinate named like the joined dim taken for a disagreement": (
        "geogpvae/fields/joining.py", "if name in first.dims or str(name) in joined or dims & joined", "if name in first.dims or dims & joined"),
    "pass19: a differing variable that places nothing refused": (
        "geogpvae/fields/joining.py", "        if dims and dims <= placing:", "        if True:"),
    "pass19: float round-off between files taken for a disagreement": (
        "geogpvae/fields/joining.py", "rtol=1e-6, atol=1e-6 * scale", "rtol=0.0, atol=0.0 * scale"),
    "pass19: the user's drop_variables not applied to the check": (
        "geogpvae/fields/joining.py", '"decode_cf", "use_cftime", "drop_variables", "decode_coords")', '"decode_cf", "use_cftime", "decode_coords")'),
    "pass19: exp of every column when recognising the training field": (
        "geogpvae/engine/core.py", "        own[:, self.log] = np.exp(own[:, self.log])", "        own = np.where(self.log, np.exp(own), own)"),
    "pass19: cftime dates taken for numbers": (
        "geogpvae/fields/geometry.py", '(dtype.kind in "mM" or (dtype.kind == "O" and is_dates))', '(dtype.kind in "mM")'),
    "pass19: a sphere column's own scale as the matching tolerance": (
        "geogpvae/engine/same_field.py", "    xtol = rtol * max(float(np.abs(ref_x).max()), np.finfo(float).tiny)",
        "    xtol = rtol * np.maximum(np.abs(ref_x).max(axis=0), np.finfo(float).tiny)"),
    "pass19: no nearest-location match where sorting fails": (
        "geogpvae/engine/same_field.py", "    if rows is None:  # rounding reordered some rows: the nearest location of each\n",
        "    if rows is None:  # rounding reordered some rows: the nearest location of each\n        return None\n"),
    "pass19: repeated locations matched by sorting": (
        "geogpvae/engine/same_field.py", "        return None  # two locations within the tolerance", "        pass  # two locations within the tolerance"),
    "pass19: isel ignored on a 1-D field": (
        "geogpvae/plot/profiles.py", "    if isel:\n        raise ValueError(f\"isel: {var!r} is a 1-D field", "    if False:\n        raise ValueError(f\"isel: {var!r} is a 1-D field"),
    "pass19: station coordinates of members joined along a new dim not compared": (
        "geogpvae/fields/joining.py", "if joins_data_vars or joined & set(map(str, v.dims))", "if joined & set(map(str, v.dims))"),
    "pass19: already_imputed reads the flags the wrong way": (
        "geogpvae/fields/cf.py", 'bool((ds[f"{n}{IMPUTED_SUFFIX}"] == 1).any())]', 'bool((ds[f"{n}{IMPUTED_SUFFIX}"] == 0).any())]'),
    "pass19: info silent about an imputed file": (
        "geogpvae/cli/info.py", '"already_imputed": already_imputed(ds, names),', '"already_imputed": [],'),
    "pass20: packing kept whatever the fills' std": (
        "geogpvae/fields/packing.py", "if imputed.any() and not abs(scale) <= STEP_SHARE", "if False and not abs(scale) <= STEP_SHARE"),
    "pass20: codes never widened": (
        "geogpvae/fields/packing.py", "(stored, np.dtype(np.int32)) if stored.itemsize < 4 else (stored,)", "(stored,)"),
    "pass20: observed values not checked through xarray": (
        "geogpvae/fields/packing.py", "return np.array_equal(back[observed], data[observed]) and fills_close", "return fills_close"),
    "pass20: packing never kept": (
        "geogpvae/fields/cf.py", "    if packing is not None:  # a packed input stays packed", "    if False:  # a packed input stays packed"),
    "pass20: std written packed too": (
        "geogpvae/fields/cf.py", 's_out.encoding["dtype"] = np.dtype(np.float32)', 's_out.encoding.update(packing)'),
    "pass20: predict on coordinates alone in the model's axis order": (
        "geogpvae/fields/stacking.py", "order = [str(d) for d in trained_dims if str(d) in found]", "order = []"),
    "pass20: GIS's dd refused as degrees": (
        "geogpvae/fields/geometry.py", 'or text in ("dd", "dd_e", "dd_n")', 'or False'),
    "pass20: fills left outside the valid range": (
        "geogpvae/fields/cf.py", "    clip_fills(name, data, imp, src_attrs, values.encoding)\n", ""),
    "pass20: clipping moves observed values too": (
        "geogpvae/fields/valid.py", "    fills = data[filled]\n", "    filled = np.ones_like(filled)\n    fills = data[filled]\n"),
    "pass20: bounds of a dropped packing left in codes": (
        "geogpvae/fields/cf.py", "src_attrs = unpacked_bounds(src_attrs, values.encoding, data.dtype)", "src_attrs = dict(src_attrs)"),
    "pass20: predictions' bounds left in codes": (
        "geogpvae/api.py", "n: unpacked_bounds(field.originals[n].attrs, field.originals[n].encoding,", "n: unpacked_bounds(field.originals[n].attrs, {},"),
    "pass20: packed bounds read as values": (
        "geogpvae/fields/valid.py", '    if "scale_factor" in encoding or "add_offset" in encoding:\n        ends', "    if False:\n        ends"),
    "pass20: selection's last line names the last candidate": (
        "geogpvae/engine/selection.py", 'f"chose beta x{best.factor:g}")', 'f"chose beta x{factors[-1]:g}")'),
    "pass20: a stop before the first epoch promises a resume": (
        "geogpvae/cli/jobs.py", "        elif epoch == 0:\n", "        elif False:\n"),
    "pass20: validate silent about clustered gaps": (
        "geogpvae/validation.py", '    if gaps == "random" and clustered:', '    if False:'),
    "pass20: never-observed places not looked for": (
        "geogpvae/fields/stacking.py", "    never = never_observed_warning(ds, field, blank, masked=mask is not None)", "    never = None"),
    "pass20: never-observed places counted at any single time": (
        "geogpvae/fields/never_observed.py", "    seen = observed.any(axis=along)", "    seen = observed.all(axis=along)"),
    "pass26: never-observed places inside a mask not looked for": (
        "geogpvae/fields/stacking.py", "    never = never_observed_warning(ds, field, blank, masked=mask is not None)",
        "    never = None if mask is not None else never_observed_warning(ds, field, blank)"),
    "pass26: places outside the mask counted as never observed": (
        "geogpvae/fields/never_observed.py", "    inside = domain.any(axis=along)",
        "    inside = np.ones_like(domain).any(axis=along)"),
    "pass26: a mask's persistent gap told to pass a mask": (
        "geogpvae/fields/stacking.py", "never_observed_warning(ds, field, blank, masked=mask is not None)",
        "never_observed_warning(ds, field, blank, masked=False)"),
    "pass26: coverage range the plain normal one": (
        "geogpvae/validation.py", "    centre = (p + z2 / (2 * n)) / (1 + z2 / n)\n    half = Z95 * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)",
        "    centre = p\n    half = Z95 * np.sqrt(p * (1 - p) / n)"),
    "pass26: validate silent about few held-out values": (
        "geogpvae/validation.py", "    if few:\n        warn_caller(few)", "    if False:\n        warn_caller(few)"),
    "pass26: coverage range from the wrong count": (
        "geogpvae/validation.py", 'coverage_range(round(row.get("cov95", 0.0) * row["n"]), row["n"])',
        'coverage_range(row["n"], row["n"])'),
    "pass26: validate's table without the few-values note": (
        "geogpvae/cli/validate.py", "    if few:\n        lines.append(f\"note: {few}\")", "    if False:\n        pass"),
    "pass26: a polar grid's corners averaged in lon/lat": (
        "geogpvae/plot/maps.py", "hedges, vedges = g.corners if g.corners is not None else (edges(g.hc), edges(g.vc))",
        "hedges, vedges = edges(g.hc), edges(g.vc)"),
    "pass26: a polar grid drawn as points": (
        "geogpvae/plot/curvilinear.py", "    polar = polar_corners(h, v)\n", "    polar = None\n"),
    "pass26: the south cap's plane taken as the north's": (
        "geogpvae/plot/polar.py", '    sign = 1.0 if cap == "north" else -1.0', "    sign = 1.0"),
    "pass26: a polar map's labels over the data": (
        "geogpvae/plot/maps.py", '{"x_inline": False, "y_inline": False, "rotate_labels": False} if view.cap is not None else {}', "{}"),
    "pass26: a polar map's labels turned along the frame": (
        "geogpvae/plot/maps.py", '"y_inline": False, "rotate_labels": False}', '"y_inline": False}'),
    "pass26: a table's sample numbers imputed as a variable": (
        "geogpvae/fields/stacking.py", "    ids = [n for n in out if _looks_like_identifier(ds[n])]\n", "    ids = []\n"),
    "pass26: any integers taken for sample numbers": (
        "geogpvae/fields/stacking.py", "return bool((np.diff(np.asarray(var.values).astype(np.int64)) > 0).all())", "return True"),
    "pass26: coordinates cast to float32 before they are centred": (
        "geogpvae/engine/core.py", "        x = check_coordinates(x)\n        # float64 centring before any float32 cast",
        "        x = check_coordinates(x).astype(np.float32).astype(np.float64)\n        # float64 centring before any float32 cast"),
    "pass26: a regional grid across 0 degrees taken for a polar cap": (
        "geogpvae/plot/polar.py", "    cap = polar_cap(float(np.ptp(lon)), lat0, lat1)",
        "    cap = polar_cap(float(np.ptp(np.mod(lon, 360.0))), lat0, lat1)"),
    "pass26: info silent about never-observed places": (
        "geogpvae/cli/info.py", "    never = _never_observed(ds, geometry, dims, names, domain, masked=bool(settings.mask_var))",
        "    never = None"),
    "pass26: info's never-observed note not printed": (
        "geogpvae/cli/info.py", "        lines.append(f\"note: {info['never_observed']['warning']}\")", "        pass"),
    "pass26: info counts land as inside a mask": (
        "geogpvae/cli/info.py", "    inside = np.ones(observed.shape, dtype=bool) if domain is None else domain.transpose(*dims).values",
        "    inside = np.ones(observed.shape, dtype=bool)"),
    "pass26: places inside a moving mask at some times only not counted": (
        "geogpvae/fields/never_observed.py", "    inside = domain.any(axis=along)",
        "    inside = domain.all(axis=along)"),
    "pass20: the metric warm-up silent": (
        "geogpvae/engine/metric.py", 'with Progress(shown_here(engine.progress), rounds,', 'with Progress(False, rounds,'),
    "pass20: --no-outlines ignored": (
        "geogpvae/cli/plot.py", "outline_holes=not args.no_outlines)", "outline_holes=True)"),
    "pass20: no _FillValue for cells left empty": (
        "geogpvae/fields/packing.py", "packing[\"_FillValue\"] = dtype.type(info.min)", "pass"),
    "pass20: fills not checked after the round trip": (
        "geogpvae/fields/packing.py", "fills_close = bool(np.all(np.abs(back[imputed] - data[imputed]) <= step))", "fills_close = True"),
    "pass20: packed bounds decoded in float64": (
        "geogpvae/fields/valid.py", "ends = _decoded(np.array([0.0 if low is None else low, 0.0 if high is None else high]), encoding)",
        "ends = np.array([0.0 if low is None else low, 0.0 if high is None else high]) * packing_of(encoding)[0] + packing_of(encoding)[1]"),
    "pass20: a negative step's bounds not swapped": (
        "geogpvae/fields/valid.py", "        if packing_of(encoding)[0] < 0:\n            low, high = high, low\n", ""),
    "pass20: validate drops the packing of its thinned copy": (
        "geogpvae/validation.py", "        work[name].encoding = dict(ds[name].encoding)", "        pass"),
    "pass20: validate repeats the never-observed warning": (
        "geogpvae/validation.py", 'warnings.filterwarnings("ignore", message=', 'warnings.filterwarnings("default", message='),
    "pass20: the mask hint names any integer variable": (
        "geogpvae/fields/never_observed.py", "if where[seen].all() and (~where[~seen]).mean() >= 0.9:", "if True:"),
    "pass20: an older model's bounds applied": (
        "geogpvae/model_file.py", 'if not fitted.get("bounds_in_values"):', "if False:"),
    "pass21: stretched variance inside clustered gaps": (
        "geogpvae/engine/calibration.py", "    if np.any(engine.clustered_gaps_):\n        var = learnt_var", "    if False:\n        var = learnt_var"),
    "pass21: learnt variance everywhere": (
        "geogpvae/engine/calibration.py", "    if np.any(engine.clustered_gaps_):\n        var = learnt_var", "    if True:\n        var = learnt_var"),
    "pass21: no stretches offered": (
        "geogpvae/engine/calibration.py", "    if stretchable(engine.model.kernel):\n        extra =", "    if False:\n        extra ="),
    "pass21: stretches only where no gaps cluster": (
        "geogpvae/engine/calibration.py", "    if stretchable(engine.model.kernel):\n        extra =",
        "    if stretchable(engine.model.kernel) and not np.any(getattr(engine, 'clustered_gaps_', False)):\n        extra ="),
    "pass21: info imports torch for a kernel name": (
        "geogpvae/engine/config.py", "        if isinstance(self.kernel, str):  # a name", "        import torch  # noqa\n        if isinstance(self.kernel, str):  # a name"),
    "pass21: degrees_west read as east": (
        "geogpvae/fields/geometry.py", "        if reversed_to is not None:\n", "        if False:\n"),
    "pass21: plot -q keeps the outlines warning": (
        "geogpvae/cli/plot.py", "            if args.quiet:  # the map", "            if False:  # the map"),
    "pass22: the long stretches not offered where gaps cluster": (
        "geogpvae/engine/calibration.py", "CLUSTERED_STRETCHES) if clustered else STRETCHES", "CLUSTERED_STRETCHES) if False else STRETCHES"),
    "pass22: a resumed selection trains its scored candidates again": (
        "geogpvae/engine/selection.py", "            if factor in best.scores:  # scored before the checkpoint",
        "            if False:  # scored before the checkpoint"),
    "pass22: a resumed selection starts its candidate over": (
        "geogpvae/engine/selection.py", "            resumed = resume is not None and resume.factor == factor",
        "            resumed = False"),
    "pass22: a selection checkpoint claims the selection is over": (
        "geogpvae/engine/state.py", '        state["engine"]["kl_factor"], kept = None, progress.best', "        kept = progress.best"),
    "pass22: the checkpointer confuses two candidates' epochs": (
        "geogpvae/cli/impute.py", '        where = (member, getattr(training.selection_, "factor", None), int(training.train_state.epoch))',
        "        where = (member, int(training.train_state.epoch))"),
    "pass22: deep targets keep the regime's source": (
        "geogpvae/engine/core.py", '        if modes.get("deep") is not None and self.deep_distance_',
        '        if False and modes.get("deep") is not None and self.deep_distance_'),
    "pass22: deep means nearer than the deep distance": (
        "geogpvae/engine/calibration.py", "dist[:, 0] > engine.deep_distance_", "dist[:, 0] < engine.deep_distance_"),
    "pass22: nothing deep unless asked": (
        "geogpvae/engine/calibration.py", 'cfg.extra.get("deep_gaps", True)', 'cfg.extra.get("deep_gaps", False)'),
    "pass22: the deep choice ignores how many values it rests on": (
        "geogpvae/engine/calibration.py", "        if sum(v.size for parts in sq for v in parts) < MIN_VALUES:",
        "        if False:"),
    "pass22: the input's fill value dropped from v": (
        "geogpvae/fields/cf.py", "        v_out.encoding.update(fill)\n", "        pass\n"),
    "pass22: the writer replaces a kept fill value by NaN": (
        "geogpvae/fields/io.py", "        enc.update(kept or {", "        enc.update({"),
    "pass22: a fill value kept although a value equals it": (
        "geogpvae/fields/packing.py", "    if any(np.any(np.asarray(a) == fill) for a in arrays):", "    if False:"),
    "pass22: a packing's code kept as the fill of unpacked floats": (
        "geogpvae/fields/packing.py", '    if "scale_factor" in encoding or "add_offset" in encoding:\n        return {}',
        '    if False:\n        return {}'),
    "pass22: numbers marked as time not taken as a time axis": (
        "geogpvae/fields/never_observed.py", '    return axis.kind != "sphere" and name in ds.variables and coordinate_role(name, ds[name]) == "time"',
        "    return False"),
    "pass22: points beyond the calibration axes dropped silently": (
        "geogpvae/plot/calibration.py", "    if beyond.any():  # the axes end", "    if False:  # the axes end"),
    "pass22: units left alone on a colour bar's last line": (
        "geogpvae/plot/style.py", "    if units and len(lines) > 1", "    if False and len(lines) > 1"),
    "pass23: two precisions of one fill value taken as two": (
        "geogpvae/fields/packing.py", "narrow = min(a.dtype, b.dtype, key=lambda d: d.itemsize)",
        "narrow = max(a.dtype, b.dtype, key=lambda d: d.itemsize)"),
    "pass23: an unsigned byte's fill kept as -1": (
        "geogpvae/fields/packing.py", 'if str(encoding.get("_Unsigned", "")).lower() == "true":',
        'if False:'),
    "pass23: the end of training announced after a beta candidate": (
        "geogpvae/cli/impute.py", "if (training.selection_ is None and int(training.train_state.epoch) >= checkpointer.total",
        "if (int(training.train_state.epoch) >= checkpointer.total"),
    "pass23: a stop during a candidate that ends the budget ignored": (
        "geogpvae/engine/selection.py", "if (state.done and stop()) or asked", "if asked"),
    "pass23: the training estimate leaves out the epochs after the selection": (
        "geogpvae/engine/progress.py", "(max(self.total - done, 0) + self.then)", "(max(self.total - done, 0))"),
    "pass23: the engine tells the selection nothing of the epochs after it": (
        "geogpvae/engine/core.py", "shape=shape, then=cfg.n_epochs(n) - epochs)", "shape=shape)"),
    "pass23: a plot warning dropped by a filter counts as shown": (
        "geogpvae/plot/style.py", "    if not _ignored(message):", "    if True:"),
    "pass23: undecoded fill cells taken as values": (
        "geogpvae/fields/stacking.py", "values[:, j] = _undecoded_fills(name, var, _take(var, dims, shape, index))",
        "values[:, j] = _take(var, dims, shape, index)"),
    "pass23: undecoded fill cells compared in float64": (
        "geogpvae/fields/valid.py", "cast = numbers.astype(var.dtype).astype(np.float64)", "cast = numbers"),
    "pass23: undecoded fill cells written back as values": (
        "geogpvae/fields/cf.py", "original = np.where(undecoded, np.nan, original) if undecoded.any() else original",
        "pass"),
    "pass23: coordinates leaving dims out go unmentioned": (
        "geogpvae/fields/stacking.py", "    if shared:  # named coordinates that leave dims out", "    if False:  # named coordinates that leave dims out"),
    "pass23: a unitless coordinate beside km goes unmentioned": (
        "geogpvae/fields/stacking.py", "    if unitless:  # an s-coordinate", "    if False:  # an s-coordinate"),
    "pass23: the scale to give for a unitless coordinate inverted": (
        "geogpvae/fields/scales.py", 'f"{name!r}: {spacing / step:.3g}"', 'f"{name!r}: {step / spacing:.3g}"'),
    "pass23: a coordinate in metres taken for unitless": (
        "geogpvae/fields/scales.py", "in NO_LENGTH_UNITS)", "in NO_LENGTH_UNITS or True)"),
    "pass23: layers of a 4-D field keep every dim": (
        "geogpvae/cli/plot.py", "args.fixed = _fix_other_dims(ds, var, args.axis, args.isel)", "args.fixed = {}"),
    "pass23: a vertical dim not preferred for layers": (
        "geogpvae/cli/plot.py", "return vertical[0] if vertical else next(", "return next("),
    "pass23: a mistyped layer axis drawn anyway": (
        "geogpvae/cli/plot.py", "if args.axis not in ds[var].dims and ds[var].ndim >= 3:",
        "if False and args.axis not in ds[var].dims and ds[var].ndim >= 3:"),
    "pass23: any unitless number taken for a level": (
        "geogpvae/fields/stacking.py", "if not looks_vertical(a.names[0], ds.variables.get(a.names[0])) or a.names[0] in",
        "if a.names[0] in"),
    "pass23: a scale given for one axis silences the others": (
        "geogpvae/fields/stacking.py", "    unitless = unitless_axes(geometry, field.x, skip)",
        "    unitless = unitless_axes(geometry, field.x, skip) if coord_scale is None else []"),
    "pass23: every fill value taken as exact in the variable's type": (
        "geogpvae/fields/valid.py", "    if np.array_equal(cast, numbers):  # the fill is exact",
        "    if True:  # the fill is exact"),
    "pass24: mask hint takes any float": (
        "geogpvae/fields/never_observed.py", "return bool(np.isin(values, (0.0, 1.0)).all())", "return True"),
    "pass24: mask hint skips coordinates": (
        "geogpvae/fields/never_observed.py",
        "candidates = list(ds.data_vars.items()) + [(n, c) for n, c in ds.coords.items() if n not in ds.dims]",
        "candidates = list(ds.data_vars.items())"),
    "pass24: placeholder cells never found": (
        "geogpvae/fields/placeholders.py", "    return np.concatenate([[False], far])[labels]", "    return found"),
    "pass24: placeholder cells found wherever a block at (0, 0) has a neighbour": (
        "geogpvae/fields/placeholders.py", "far = np.isfinite(closest) & (closest > steps * step)",
        "far = np.isfinite(closest)"),
    "pass24: placeholder cells need only one coordinate at 0": (
        "geogpvae/fields/placeholders.py", "zero = (h == 0) & (v == 0)", "zero = (h == 0) | (v == 0)"),
    "pass24: placeholder cells left unmentioned before imputation": (
        "geogpvae/fields/stacking.py", "for text in (never, placeholder_warning(ds, field, blank)):", "for text in (never,):"),
    "pass24: placeholder cells with values warned about": (
        "geogpvae/fields/placeholders.py", "holes = int((blank & inside & ~seen).sum())",
        "holes = int((blank & inside).sum())"),
    "pass24: placeholder cells a mask leaves out warned about": (
        "geogpvae/fields/placeholders.py", "holes = int((blank & inside & ~seen).sum())",
        "holes = int((blank & ~seen).sum())"),
    "pass24: placeholder cells drawn as cells at (0, 0)": (
        "geogpvae/plot/curvilinear.py", "    blank = _placeholders(h, v)\n", "    blank = _placeholders(h, v) & False\n"),
    "pass24: placeholder cells left blank without a warning": (
        "geogpvae/plot/curvilinear.py", "    if blank.any():  # the caller of field_map", "    if False:  # the caller of field_map"),
    "pass24: placeholder cells' centres not extended past the grid's edge": (
        "geogpvae/plot/style.py", "        for side, (a, b) in ((k < known[0], known[:2]), (k > known[-1], known[-2:])):",
        "        for side, (a, b) in ():"),
    "pass24: placeholder cells, imputed, drawn with their values": (
        "geogpvae/plot/maps.py", "        value = np.where(g.blank, np.nan, value)\n", ""),
    "pass24: placeholder cells, imputed, counted inside the domain": (
        "geogpvae/plot/maps.py", "obs, imp, inside = obs & ~g.blank, imp & ~g.blank, inside & ~g.blank",
        "obs, imp, inside = obs, imp, inside"),
    "pass24: placeholder cells drawn as points at (0, 0)": (
        "geogpvae/plot/maps.py", "(np.isfinite(h + v) & ~found.blank)", "np.isfinite(h + v)"),
    "pass24: budget no floor of epochs": (
        "geogpvae/engine/config.py", "            epochs = max(epochs, min(MIN_EPOCHS, 3 * epochs))", "            pass"),
    "pass24: budget floor not capped at three times": (
        "geogpvae/engine/config.py", "epochs = max(epochs, min(MIN_EPOCHS, 3 * epochs))", "epochs = max(epochs, MIN_EPOCHS)"),
    "pass24: budget floor raises the stopping rule's cap": (
        "geogpvae/engine/config.py", "if not self.stops_early() and n_points <= MIN_EPOCHS_UP_TO:",
        "if n_points <= MIN_EPOCHS_UP_TO:"),
    "pass24: budget floor on every size": (
        "geogpvae/engine/config.py", "if not self.stops_early() and n_points <= MIN_EPOCHS_UP_TO:",
        "if not self.stops_early():"),
    "pass24: title dates without their hours": (
        "geogpvae/plot/style.py", 'unit="D" if day == value else "m"', 'unit="D"'),
    "pass24: title dates of cftime printed whole": (
        "geogpvae/plot/style.py", 'if hasattr(item, "calendar") and hasattr(item, "strftime"):', "if False:"),
    "pass24: two-fill warnings of unused variables relayed": (
        "geogpvae/cli/impute.py", "    with _open(job.inputs, s.concat_dim, s.vars) as ds:", "    with _open(job.inputs, s.concat_dim) as ds:"),
    "pass24: two-fill warnings dropped for every variable": (
        "geogpvae/cli/files.py", "if found and variables is not None and found.group(1) not in variables:", "if found:"),
    "pass24: placeholder cells counted again as never observed": (
        "geogpvae/fields/never_observed.py",
        "unexplained = inside & ~seen if blank is None or blank[0] != places else inside & ~seen & ~blank[1]",
        "unexplained = inside & ~seen"),
    "pass24: map hint never given": (
        "geogpvae/cli/plot.py", "    if found is None or axis is None or axis in found[0].dims:", "    if True:"),
    "pass24: placeholder blocks' own cells taken as their neighbours": (
        "geogpvae/fields/placeholders.py", "        keep = ~zero[r, c]", "        keep = np.ones_like(r, dtype=bool)"),
    "pass25: short budget warned again on resuming": (
        "geogpvae/engine/core.py", "        if resume is None:\n            warn_short_epochs", "        if True:\n            warn_short_epochs"),
    "pass25: short budget warned at exactly half": (
        "geogpvae/engine/config.py", "self.epochs < SHORT_EPOCHS_SHARE * default", "self.epochs <= SHORT_EPOCHS_SHARE * default"),
    "pass25: short budget against the stopping rule's cap": (
        "geogpvae/engine/config.py", "self.replace(epochs=None, holdout=0.0).n_epochs", "self.replace(epochs=None).n_epochs"),
    "pass25: short budget against the default batch size": (
        "geogpvae/engine/config.py", "self.replace(epochs=None, holdout=0.0).n_epochs", "self.replace(epochs=None, holdout=0.0, batch_size=None).n_epochs"),
    "pass25: info silent on a short budget": (
        "geogpvae/cli/info.py", '"default_epochs": config.short_of_default(n),', '"default_epochs": None,'),
    "pass25: short budget in the library's words on the command line": (
        "geogpvae/cli/common.py", '    (re.compile(r"leave epochs unset \\(None\\)"), "leave --epochs out"),\n', ""),
    "pass25: demo warns of its own quick budget": (
        "geogpvae/cli/demo.py", '        warnings.simplefilter("ignore", TrainingWarning)', "        pass"),
    "pass25: demo's first line silent on the budget": (
        "geogpvae/cli/demo.py", 'f" (the default budget: {default})"', '""'),
    "pass25 userpass: 2-D coordinate on a dim left unnamed in its warning": (
        "geogpvae/fields/geometry.py", "if d in ds[n].dims and all(n != c for c, _ in chosen)]",
        "if d in ds[n].dims and n == d]"),
    "pass25 userpass: colour bar offset text left over its label": (
        "geogpvae/plot/style.py", '        if cb.orientation == "horizontal":\n            _offset_above(cb.ax.xaxis)',
        "        if False:\n            _offset_above(cb.ax.xaxis)"),
    "pass25 userpass: profile along a dim without its own coordinate drawn in positions": (
        "geogpvae/plot/profiles.py", "    return on_dim[0] if len(on_dim) == 1 else None", "    return None"),
    "pass25 userpass: map title gives a dim's index as its value": (
        "geogpvae/plot/maps.py", 'else f"{d} index {k % n}")', 'else f"{d} = {k % n}")'),
    "pass25: one site picked by isel drawn as a map": (
        "geogpvae/plot/profiles.py", "    if _picks_one_site(ds, f.value, coords, isel):", "    if False:"),
    "pass25: one depth picked by isel drawn as a profile": (
        "geogpvae/plot/profiles.py", "return sites is not None and sites[0] in isel and", "return sites is not None and"),
    "pass25: a picked site's profile untitled": (
        "geogpvae/plot/profiles.py", "    fig.axes[0].set_title(f\"{f.name} ({', '.join(notes)})\")\n", ""),
    "pass25: a picked site's profile said to be a map": (
        "geogpvae/cli/plot.py", '            kind = "profile" if any(ax.get_gid() == "profile" for ax in fig.axes) else kind', "            pass"),
    "pass25 userpass2: clipping warning says v_std": (
        "geogpvae/fields/valid.py", "the nearest valid value; {name}_std is", "the nearest valid value; v_std is"),
    "pass25 userpass2: clipping warning proposes log for a bounded fraction": (
        "geogpvae/fields/valid.py", "            if high is None else \"\")", "            if True else \"\")"),
    "pass25 userpass2: polar cap on the global PlateCarree map": (
        "geogpvae/plot/maps.py",
        "view.cap = (polar_cap(view.span, v0, v1) or enclosed_pole(hedges, vedges) or beside) if projection is None else None",
        "view.cap = None"),
    "pass25: rotated-pole coordinates taken as flat x/y": (
        "geogpvae/fields/geometry.py", '    "grid_longitude": "lon",\n    "grid_latitude": "lat",\n', ""),
    "pass25: a rotated grid's true lon/lat kept beside its own (a warning)": (
        "geogpvae/fields/geometry.py", '    if {"grid_longitude", "grid_latitude"} <= {_standard_name(ds[n]) for n, _ in chosen}:',
        "    if False:"),
    "pass25: layers in a grid's own coordinates said to be in grid steps": (
        "geogpvae/cli/plot.py", 'drawn = f"drawn in its {\'/\'.join(grid)} coordinates" if own else "drawn in grid steps"',
        'drawn = "drawn in grid steps"'),
    "pass25 userpass3: a grid far from every training site predicted without a warning": (
        "geogpvae/fields/extent.py", "        if extent > 0 and gap > extent:", "        if False:"),
    "pass25 userpass3: predicted coordinates without the training units": (
        "geogpvae/api.py", '            elif axis.kind == "linear" and axis.units:', "            elif False:"),
    "pass25: latent cap's mean left at the prior's": (
        "geogpvae/engine/predict.py", "            means[s : s + chunk] += (1.0 - w.sum(-1)) * centre", "            pass"),
    "pass25: latent cap's variance not capped": (
        "geogpvae/engine/predict.py", "variances = torch.minimum(variances, mean_anchor.var(0) + var_anchor.mean(0))",
        "variances = variances"),
    "pass25: latent cap never reaching the conditional": (
        "geogpvae/engine/core.py", 'toward_anchors=bool(self.config.extra.get("latent_cap", True)))', "toward_anchors=False)"),
    "pass25: training locations without the centring offset": (
        "geogpvae/engine/core.py", "return None if self._x is None else self._x / self.x_scale_ + self.x_offset_",
        "return None if self._x is None else self._x / self.x_scale_"),
    "pass26 userpass: a table's lon/lat data variables not named when no coordinates are found": (
        "geogpvae/fields/geometry.py", "    if not like:\n", "    if True:\n"),
    "pass26 userpass: the command shows coords=[...] for a table's lon/lat, not --coords": (
        "geogpvae/cli/common.py", "\\] \\(or make them coordinates, ds", "\\] \\(or make them coords, ds"),
    "pass26 userpass: detection-limit text such as '<0.1' not named in the refusal": (
        "geogpvae/fields/stacking.py", "                return str(value)\n", "                return \"\"\n"),
    "pass26 userpass: blank CSV cells taken for the text that is not a number": (
        "geogpvae/fields/stacking.py", "if isinstance(value, str) and value.strip():", "if isinstance(value, str):"),
    "pass26 userpass: no advice on what a detection-limit value stands for": (
        "geogpvae/fields/stacking.py", "    \"; a value past a detection limit", "    \"; a value past a limit"),
    "pass26 userpass: a scattered survey's depth_cm coordinate left unused without a word": (
        "geogpvae/fields/geometry.py", "    if unused:  # two samples", "    if False:  # two samples"),
    "pass26 userpass: a scattered site's own index warned of as an unused coordinate": (
        "geogpvae/fields/geometry.py", "[n for n, r in found if r is None and n != dims[0]]",
        "[n for n, r in found if r is None]"),
    "pass26 userpass: the command shows coords=['lon', 'lat', 'depth_cm'], not --coords": (
        "geogpvae/cli/common.py", "(?! \\(--coords)\"),\n     lambda m: \"--coords \"", "(?! \\(--coords)\"),\n     lambda m: \"coords= \""),
    "pass27: lengthscale_rank ignored": (
        "geogpvae/engine/starts.py", 'rank = int(extra.get("lengthscale_rank", neighbours))',
        "rank = int(neighbours)"),
    "pass27: the spread of channel starts runs the wrong way": (
        "geogpvae/engine/starts.py", "steps = np.arange(n_channels) / (n_channels - 1)",
        "steps = np.arange(n_channels)[::-1] / (n_channels - 1)"),
    "pass27: the spread reaches the channels through the scalar start only": (
        "geogpvae/engine/core.py",
        "lengthscale=channel_lengthscales(self.lengthscale_, self.lengthscale_near_, cfg.latent_size(n_vars)),",
        "lengthscale=self.lengthscale_,"),
    "pass27 helper: one map searches its grid for placeholder cells twice": (
        "geogpvae/plot/curvilinear.py", "return _Curvilinear(*found, blank, _mesh_centres(h, v, blank))",
        "return _Curvilinear(*found, _placeholders(h, v), _mesh_centres(h, v, blank))"),
    "pass27 helper: the placeholder warning names a line inside pytest, not the map's caller": (
        "geogpvae/plot/curvilinear.py", '"they are left blank", stacklevel=5)', '"they are left blank", stacklevel=6)'),
    "pass27 helper: a polar map framed by its cells' centres, its outer cells cut in half": (
        "geogpvae/plot/maps.py", "    return polar_extent(view.ccrs, view.proj, view.hedges, view.vedges)\n",
        "    return polar_extent(view.ccrs, view.proj, g.hc, g.vc)\n"),
    "pass27 helper: a regular grid's polar map framed by its first corner": (
        "geogpvae/plot/maps.py", "view.hedges[None, :], view.vedges[:, None])", "view.hedges[:1, None], view.vedges[:1, None])"),
    "pass27 helper: a polar map's sites on its frame, with no margin": (
        "geogpvae/plot/maps.py", "g.hc, g.vc, pad=0.05)", "g.hc, g.vc, pad=0.0)"),
    "pass27 helper: a polar map's box over longitudes past 540 degrees": (
        "geogpvae/plot/polar.py", "np.mod(h[keep] + 180.0, 360.0) - 180.0, v[keep])", "h[keep], v[keep])"),
    "pass27 helper: a polar map's box taller than its data": (
        "geogpvae/plot/polar.py", "margin = pad * max(x1 - x0, y1 - y0)", "margin = pad * max(x1 - x0, y1 - y0) + 0.3 * (y1 - y0)"),
    "pass27: rule 14's shrinks not offered": (
        "geogpvae/engine/calibration.py", "STRETCHES = (0.25, 0.5, 2.0, 4.0)", "STRETCHES = (2.0, 4.0)"),
    "pass27: a shrink scored as the stretch of its inverse": (
        "geogpvae/engine/calibration.py", "    return base, float(factor) if factor else 1.0",
        "    return base, (max(float(factor), 1 / float(factor)) if factor else 1.0)"),
    "pass28: the check values seen as inputs in the comparison pass": (
        "geogpvae/engine/memorisation.py", "score_hidden(engine, check | compare, rows,", "score_hidden(engine, scored, rows,"),
    "pass28: the ratio not scaled to the fit's epochs": (
        "geogpvae/engine/memorisation.py", "growth = 1.0 if budget is None else budget / max(state.epoch, 1)", "growth = 1.0"),
    "pass28: ratios below one kept": (
        "geogpvae/engine/memorisation.py", "RATIO_RANGE = (1.0, 2.0)", "RATIO_RANGE = (0.0, 2.0)"),
    "pass28: the ratios measured but not applied": (
        "geogpvae/engine/calibration.py", "        factors = with_memorisation(factors, engine.memorisation_, chosen, engine.noise_)\n",
        "        pass\n"),
    "pass28: the ratio of the first variance for every variable": (
        "geogpvae/engine/calibration.py", '                key += f"|{noise[regime][j]}"', '                key += f"|{noise[regime][0]}"'),
    "pass28: the candidate's live weights measured, not its averages": (
        "geogpvae/engine/memorisation.py", "    if state.average is not None:\n        core.load_state_dict({**live, **state.average})\n    kept",
        "    kept"),
    "pass28: the ratios lost in a checkpoint": (
        "geogpvae/engine/state.py", '    eng.memorisation_ = dict(state.get("memorisation") or {})\n', ""),
    "pass28: the experiment's check share on mini-batch fits too": (
        "geogpvae/engine/selection.py", "    if config.batch_for(n_points) >= n_points:\n        return float(",
        "    if True:\n        return float("),
    "pass28: the experiment's check share ignored": (
        "geogpvae/engine/core.py", "(selection_holdout(cfg, n) if selecting else 0.0)", "(SELECTION_HOLDOUT if selecting else 0.0)"),
    "pass28 helper: a sea-ice grid's polar map centred on its corners' middle longitude, not turned to the grid": (
        "geogpvae/plot/polar.py", "aligned = centre + (turn if cap == \"north\" else -turn)", "aligned = centre"),
    "pass28 helper: a sea-ice grid's polar map turned the wrong way": (
        "geogpvae/plot/polar.py", "aligned = centre + (turn if cap == \"north\" else -turn)",
        "aligned = centre + (-turn if cap == \"north\" else turn)"),
    "pass28 helper2: a grid beside the pole taken for one that encloses it": (
        "geogpvae/plot/polar.py", "    return cap if abs(round(turns)) == 1 else None\n", "    return cap\n"),
    "pass28 helper2: a grid across the equator taken for a polar cap": (
        "geogpvae/plot/polar.py", "    if v.min() > HEMISPHERE_EDGE:\n", "    if v.max() > HEMISPHERE_EDGE:\n"),
    "pass28 helper2: a ring's turns added in raw longitudes, not within 180 degrees": (
        "geogpvae/plot/polar.py", "turns = np.sum(np.mod(np.diff(ring) + 180.0, 360.0) - 180.0) / 360.0",
        "turns = np.sum(np.diff(ring)) / 360.0"),
    "pass28 helper2: an NSIDC grid's corners not taken in the polar plane (drawn as points)": (
        "geogpvae/plot/polar.py", "or enclosed_pole(lon, lat) or beside_pole(lat0, lat1)", "or beside_pole(lat0, lat1)"),
    "pass28 helper2: an NSIDC grid's cells on the global PlateCarree map": (
        "geogpvae/plot/maps.py", "(polar_cap(view.span, v0, v1) or enclosed_pole(hedges, vedges) or beside)", "(polar_cap(view.span, v0, v1) or beside)"),
    "pass29: the mixture without the members' disagreement": (
        "geogpvae/engine/members.py", "(stds**2).mean(axis=0) + ((means - mean) ** 2).mean(axis=0)", "(stds**2).mean(axis=0)"),
    "pass29: every member with the engine's own seed": (
        "geogpvae/engine/members.py", "    return seed + k\n", "    return seed\n"),
    "pass29: the members' samples drawn with the engine's seed": (
        "geogpvae/engine/members.py", "m.predict(x, values, seed=member_seed(seed, k), **options)", "m.predict(x, values, seed=seed, **options)"),
    "pass29: the members not saved": (
        "geogpvae/engine/state.py", '    if getattr(eng, "members_", None):  # members > 1', '    if False:  # members > 1'),
    "pass29: the members not restored": (
        "geogpvae/engine/state.py", '    eng.members_ = [restore_engine(cls, m, device=device, progress=progress) for m in state.get("members", [])]\n', ""),
    "pass29: a member stopped half-way kept": (
        "geogpvae/engine/members.py", "            engine.interrupted = True\n            break\n", "            engine.interrupted = True\n"),
    "pass29: the finished members left out of a checkpoint": (
        "geogpvae/engine/members.py", '    return {"done": [snapshot(m) for m in engine.members_],', '    return {"done": [],'),
    "pass29: the member in training left out of a checkpoint": (
        "geogpvae/engine/members.py", '"current": None if current is None or current.train_state is None else snapshot(current)}',
        '"current": None}'),
    "pass29: a resumed member trained afresh": (
        "geogpvae/engine/members.py", "resume=snapshots[k - 1] if k <= len(snapshots) else None,", "resume=None,"),
    "pass29: the command line reads the engine's epochs while a member trains": (
        "geogpvae/cli/impute.py", "    return (0, engine) if member is None else (len(engine.members_) + 1, member)", "    return (0, engine)"),
    "pass29: members=0 accepted": (
        "geogpvae/engine/config.py", '"samples": 1, "members": 1}', '"samples": 1, "members": 0}'),
    "pass29: the end of training announced after the first of two models": (
        "geogpvae/cli/impute.py", "                    and member + 1 >= engine.config.members):", "                    and True):"),
    "pass30: a stop asked for before the first epoch": (
        "geogpvae/engine/training.py", "for epoch in range(state.epoch, state.epoch if state.done else last):",
        "for epoch in range(state.epoch, state.epoch if state.done or (should_stop is not None and should_stop()) else last):"),
    "pass30 maps: a falling y coordinate ignored": (
        "geogpvae/plot/maps.py", "return bool(coord.values[-1] >= coord.values[0])", "return True"),
    "pass30 maps: the quarter turn nearest the provisional centre": (
        "geogpvae/plot/polar.py", "best = max((aligned + 90.0 * k for k in range(4)), key=climb)", "best = aligned"),
    "pass30 maps: rows climb the other way": (
        "geogpvae/plot/polar.py", "(1.0 if rows_up else -1.0))", "(-1.0 if rows_up else 1.0))"),
    "pass31: the beta candidate measures the recall under the stopping rule too": (
        "geogpvae/engine/core.py", "        if not cfg.stops_early():  # (with the stopping rule",
        "        if True:  # (with the stopping rule"),
    "pass31: the final recall from the averaged weights": (
        "geogpvae/engine/core.py", "final = dataclasses.replace(self.train_state, average=None)", "final = self.train_state"),
    "pass31: the final recall measured after the check values went back": (
        "geogpvae/engine/core.py", "            if self.train_state.done and corrects_memorisation(cfg, n):",
        "            self._data = self._without_check(x, y, observed)\n            if self.train_state.done and corrects_memorisation(cfg, n):"),
    "pass31: the ceiling ignored": (
        "geogpvae/engine/config.py", 'if self.stops_early() and "stop_ceiling" in self.extra:', "if False:"),
    "pass31 polar: no clear direction guard dropped": (
        "geogpvae/plot/polar.py", "if not length.size or abs(total) < 0.5 * length.sum():", "if not length.size:"),
    "pass31 polar: a cap may reach the equator": (
        "geogpvae/plot/polar.py", "    if v.min() > HEMISPHERE_EDGE:", "    if v.min() > 0.0:"),
    "pass31 polar: a southern cap may reach the equator": (
        "geogpvae/plot/polar.py", "    elif v.max() < -HEMISPHERE_EDGE:", "    elif v.max() < 0.0:"),
    "pass31 beside: a grid beside the pole keeps PlateCarree": (
        "geogpvae/plot/maps.py", " or enclosed_pole(hedges, vedges) or beside)", " or enclosed_pole(hedges, vedges))"),
    "pass31 beside: a regular grid beside the pole turned into a wedge": (
        "geogpvae/plot/maps.py", "beside = beside_pole(v0, v1) if np.ndim(hedges) != 1 else None", "beside = beside_pole(v0, v1)"),
    "pass31 beside: corners of a grid beside the pole averaged in lon/lat": (
        "geogpvae/plot/polar.py", " or enclosed_pole(lon, lat) or beside_pole(lat0, lat1)", " or enclosed_pole(lon, lat)"),
    "pass31 beside: any data reaching 80 degrees beside the pole": (
        "geogpvae/plot/polar.py", "    if lat0 >= POLAR_EDGE and lat1 >= NEAR_POLE:", "    if lat1 >= NEAR_POLE:"),
    "pass31 variables: no word on a depth column": (
        "geogpvae/fields/stacking.py", "    placed = [n for n in out if _looks_like_position(n, ds[n])]", "    placed = []"),
    "pass31 variables: a depth with gaps taken for a position": (
        "geogpvae/fields/stacking.py", 'return values.dtype.kind in "iuf" and bool(np.isfinite(values).all())', "return True"),
    "pass31 variables: the command advises ds.set_coords": (
        "geogpvae/cli/common.py", "(?=; name the variables)", "(?=; never)"),
    "pass31 variables: a depth beside a grid said to be imputed": (
        "geogpvae/fields/stacking.py", " and all(ds[n].ndim == 1 for n in out):", ":"),
    "pass31 variables: a depth column taken out of the variables": (
        "geogpvae/fields/stacking.py", "ds.set_coords({placed}); name the variables with vars=[...] to silence this\"\n        )\n",
        "ds.set_coords({placed}); name the variables with vars=[...] to silence this\"\n        )\n        out = [n for n in out if n not in placed]\n"),
}


def main(argv: list[str]) -> int:
    """``mutants.py [-k TEXT] [TESTS ...]``: the mutants whose name holds TEXT, against TESTS."""
    root = Path(__file__).resolve().parents[2]
    only = ""
    if argv[:1] == ["-k"]:
        only, argv = argv[1], argv[2:]
    tests = argv or ["tests/engine/test_elbo.py"]
    survived = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, old, new) in MUTANTS.items():
            if only not in name:
                continue
            dst = Path(tmp) / "mutant"
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(root, dst, ignore=shutil.ignore_patterns(".git", "notebooks", "docs", "*.nc", "__pycache__"))
            text = (dst / path).read_text()
            if old not in text:
                print(f"{name}: PATTERN NOT FOUND in {path} (update this script)")
                survived += 1
                continue
            (dst / path).write_text(text.replace(old, new))
            run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=dst,
                                 env={**os.environ, "PYTHONPATH": str(dst)}, capture_output=True, text=True, check=False)
            failed = sorted({line.split(" ")[1].split("[")[0].split("::")[-1]
                             for line in run.stdout.splitlines() if line.startswith("FAILED")})
            print(f"{name}: {'CAUGHT by ' + ', '.join(failed) if run.returncode else 'SURVIVED'}", flush=True)
            survived += run.returncode == 0
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
