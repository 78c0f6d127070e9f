"""gpytorch kernels as latent kernels: same numbers as the built-ins, saved and rebuilt safely."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpytorch.kernels import (
    LinearKernel,
    MaternKernel,
    PeriodicKernel,
    RBFKernel,
    RQKernel,
    ScaleKernel,
)

from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.model import GPVAE
from geogpvae.errors import InputError
from geogpvae.gp.kernels import LatentKernel
from geogpvae.gp.priors.hpa import hpa_kl
from geogpvae.gp.priors.spa import spa_kl
from geogpvae.gp.user_kernels import GPyTorchLatentKernel, kernel_from_spec, kernel_spec

GPYTORCH_OF = {
    "rbf": lambda: RBFKernel(ard_num_dims=2),
    "matern12": lambda: MaternKernel(nu=0.5, ard_num_dims=2),
    "matern32": lambda: MaternKernel(nu=1.5, ard_num_dims=2),
    "matern52": lambda: MaternKernel(nu=2.5, ard_num_dims=2),
}


def _pair(kind: str, lengthscales, outputscales):
    """A built-in kernel and the same kernel in gpytorch, with equal hyperparameters."""
    builtin = LatentKernel(kind, len(outputscales), 2, lengthscale=torch.tensor(lengthscales),
                           outputscale=torch.tensor(outputscales)).double()
    user = GPyTorchLatentKernel(ScaleKernel(GPYTORCH_OF[kind]()), len(outputscales), 2).double()
    with torch.no_grad():
        for channel, ls, os_ in zip(user.channels, lengthscales, outputscales):
            channel.base_kernel.lengthscale = torch.tensor([ls], dtype=torch.float64)
            channel.outputscale = torch.tensor(os_, dtype=torch.float64)
    return builtin, user


@pytest.mark.parametrize("kind", sorted(GPYTORCH_OF))
def test_gpytorch_blocks_equal_the_builtin_ones(kind):
    builtin, user = _pair(kind, [[0.7, 1.3], [2.0, 0.4]], [1.5, 0.6])
    pts = torch.rand(5, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(user.blocks(pts), builtin.blocks(pts))
    torch.testing.assert_close(user(pts[0], pts[1]), builtin(pts[0], pts[1]))
    torch.testing.assert_close(user.outputscale, builtin.outputscale)


def test_priors_with_a_gpytorch_kernel_equal_the_builtin_priors():
    builtin, user = _pair("matern32", [[0.5, 0.9], [1.2, 0.3], [0.8, 0.8]], [1.0, 2.0, 0.5])
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(30, 2, dtype=torch.float64, generator=gen)
    mean = torch.randn(30, 3, dtype=torch.float64, generator=gen)
    var = torch.rand(30, 3, dtype=torch.float64, generator=gen) + 0.1
    nbr = torch.stack([torch.randperm(30, generator=gen)[:5] for _ in range(8)])
    valid = torch.ones(8, 5, dtype=torch.bool)
    torch.testing.assert_close(hpa_kl(user, x[nbr], valid, mean[nbr], var[nbr], 1e-4),
                               hpa_kl(builtin, x[nbr], valid, mean[nbr], var[nbr], 1e-4))
    j = torch.arange(8)
    torch.testing.assert_close(
        spa_kl(user, x[j], x[nbr], valid, mean[j], var[j], mean[nbr], var[nbr], 1e-4),
        spa_kl(builtin, x[j], x[nbr], valid, mean[j], var[j], mean[nbr], var[nbr], 1e-4),
    )


def test_hyperparameters_train_per_channel_and_leave_the_users_kernel_alone():
    kernel = ScaleKernel(RBFKernel())
    before = {k: v.clone() for k, v in kernel.state_dict().items()}
    model = GPVAE(2, 2, 3, kernel=kernel)
    assert len(model.kernel.channels) == 3 and model.kernel.channels[0] is not kernel
    names = [n for n, p in model.named_parameters() if p.requires_grad and n.startswith("kernel.")]
    assert len(names) == 6  # lengthscale and outputscale of each of the 3 channels
    with torch.no_grad():
        model.kernel.channels[0].outputscale = torch.tensor(4.0)
    assert float(model.kernel.outputscale[0].detach()) == pytest.approx(4.0)
    for k, v in kernel.state_dict().items():
        torch.testing.assert_close(v, before[k])


def test_description_round_trip_keeps_the_structure():
    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=2, active_dims=[0, 1])
                         * PeriodicKernel(active_dims=[2])) + ScaleKernel(RQKernel())
    spec = kernel_spec(kernel)
    rebuilt = kernel_from_spec(spec)
    assert kernel_spec(rebuilt) == spec
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {
        k: v.shape for k, v in kernel.state_dict().items()
    }
    cfg = GPVAEConfig(kernel=kernel)
    again = GPVAEConfig.from_dict(cfg.to_dict())
    assert kernel_spec(again.kernel) == spec
    assert cfg.kernel_name.startswith("(ScaleKernel((MaternKernel(nu=2.5")
    assert cfg.replace(neighbours=5).kernel is kernel  # replace keeps the instance


def test_kernels_geogpvae_cannot_use_are_refused():
    with pytest.raises(InputError, match="not stationary"):
        GPVAEConfig(kernel=LinearKernel())

    class Mine(RBFKernel):
        pass

    with pytest.raises(InputError, match="not one of gpytorch.kernels"):
        GPVAEConfig(kernel=Mine())
    with pytest.raises(InputError, match="active_dims"):
        GPVAE(2, 2, 2, kernel=RBFKernel(active_dims=[3]))
    with pytest.raises(InputError, match="unknown gpytorch kernel"):
        kernel_from_spec({"class": "os"})


def test_space_time_kernel_imputes_and_reloads_bit_exact(tmp_path):
    import geogpvae
    from geogpvae.datasets import make_gaussian_field

    ds = make_gaussian_field((12, 14), seed=2)
    kernel = ScaleKernel(MaternKernel(nu=1.5, active_dims=[0]) * PeriodicKernel(active_dims=[1]))
    imp = geogpvae.GPVAEImputer(neighbours=6, epochs=2, progress=False, kernel=kernel).fit(ds)
    out = imp.impute(ds)
    assert "PeriodicKernel" in out.attrs["geogpvae_kernel"]
    imp.save(tmp_path / "m.pt")
    again = geogpvae.GPVAEImputer.load(tmp_path / "m.pt").impute(ds)
    for name in ("v0", "v0_std", "v1", "v1_std"):
        np.testing.assert_array_equal(out[name].values, again[name].values)
