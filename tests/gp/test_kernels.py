"""Kernels: closed forms at known distances, positive definiteness, batching over channels."""

import math

import gpytorch
import pytest
import torch

from geogpvae.gp.kernels import KERNELS, LatentKernel, kernel_from_sqdist


@pytest.fixture(autouse=True)
def _float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("rbf", lambda r: math.exp(-0.5 * r * r)),
        ("matern12", lambda r: math.exp(-r)),
        ("matern32", lambda r: (1 + math.sqrt(3) * r) * math.exp(-math.sqrt(3) * r)),
        ("matern52", lambda r: (1 + math.sqrt(5) * r + 5 * r * r / 3) * math.exp(-math.sqrt(5) * r)),
        ("cauchy", lambda r: 1 / (1 + r * r)),
    ],
)
def test_closed_form_at_known_distances(kind, expected):
    k = LatentKernel(kind, 1, 2, lengthscale=[2.0, 0.5], outputscale=1.7)
    x1 = torch.tensor([[0.0, 0.0]])
    for dx, dy in [(0.0, 0.0), (2.0, 0.0), (0.0, 0.5), (1.0, 0.25), (4.0, 1.5)]:
        r = math.hypot(dx / 2.0, dy / 0.5)
        got = k(x1, torch.tensor([[dx, dy]]))[0, 0, 0].item()
        assert got == pytest.approx(1.7 * expected(r), rel=1e-12)


@pytest.mark.parametrize("kind", KERNELS)
def test_positive_definite_on_random_inputs(kind):
    torch.manual_seed(0)
    x = torch.rand(60, 3) * 5
    k = LatentKernel(kind, 4, 3, lengthscale=torch.rand(4, 3) + 0.2, outputscale=torch.rand(4) + 0.5)
    cov = k(x)
    assert cov.shape == (4, 60, 60)
    torch.testing.assert_close(cov, cov.mT)
    eig = torch.linalg.eigvalsh(cov)
    assert (eig > -1e-10).all()
    assert (eig.min(-1).values / eig.max(-1).values > -1e-12).all()
    # diagonal is the outputscale
    torch.testing.assert_close(torch.diagonal(cov, dim1=-2, dim2=-1), k.outputscale[:, None].expand(4, 60))


def test_matches_gpytorch():
    torch.manual_seed(1)
    x1, x2 = torch.rand(7, 2), torch.rand(5, 2)
    ls = torch.tensor([0.3, 0.8])
    ours = {kind: LatentKernel(kind, 1, 2, lengthscale=ls)(x1, x2)[0] for kind in KERNELS}
    refs = {
        "rbf": gpytorch.kernels.RBFKernel(ard_num_dims=2),
        "matern12": gpytorch.kernels.MaternKernel(nu=0.5, ard_num_dims=2),
        "matern32": gpytorch.kernels.MaternKernel(nu=1.5, ard_num_dims=2),
        "matern52": gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=2),
    }
    for kind, ref in refs.items():
        ref = ref.double()
        ref.lengthscale = ls
        torch.testing.assert_close(ours[kind], ref(x1, x2).to_dense(), rtol=1e-6, atol=1e-8)
    # Cauchy is gpytorch's rational quadratic with alpha = 1 and lengthscale l / sqrt(2)
    rq = gpytorch.kernels.RQKernel(ard_num_dims=2).double()
    rq.alpha = 1.0
    rq.lengthscale = ls / math.sqrt(2.0)
    torch.testing.assert_close(ours["cauchy"], rq(x1, x2).to_dense(), rtol=1e-6, atol=1e-8)


def test_channels_have_own_hyperparameters_and_batch_dims():
    ls = torch.tensor([[0.5, 0.5], [2.0, 1.0]])
    k = LatentKernel("rbf", 2, 2, lengthscale=ls, outputscale=[1.0, 3.0])
    x = torch.rand(4, 6, 2)  # a batch of 4 sets of 6 points
    cov = k(x)
    assert cov.shape == (4, 2, 6, 6)
    for c in range(2):
        single = LatentKernel("rbf", 1, 2, lengthscale=ls[c], outputscale=[1.0, 3.0][c])
        torch.testing.assert_close(cov[:, c], single(x)[:, 0])


def test_frozen_hyperparameters_are_buffers():
    k = LatentKernel("cauchy", 3, 2, learn_lengthscale=False, learn_outputscale=True)
    names = {n for n, _ in k.named_parameters()}
    assert names == {"raw_outputscale"}
    torch.testing.assert_close(k.lengthscale, torch.ones(3, 2))


def test_matern_gradient_finite_on_diagonal():
    x = torch.rand(5, 2)
    k = LatentKernel("matern12", 1, 2, lengthscale=0.3)
    k(x).sum().backward()
    assert torch.isfinite(k.raw_lengthscale.grad).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown kernel"):
        LatentKernel("laplace", 1, 1)
    with pytest.raises(ValueError, match="positive"):
        LatentKernel("rbf", 1, 1, lengthscale=-1.0)
    with pytest.raises(ValueError, match="unknown kernel"):
        kernel_from_sqdist(torch.zeros(1), "nope")


def _masked_kernel(r2: torch.Tensor, kind: str) -> torch.Tensor:
    """The Matern kernels with the root written with masks (zero gradient at 0): the reference."""
    positive = r2 > 0
    r = torch.where(positive, torch.sqrt(torch.where(positive, r2, torch.ones_like(r2))), 0.0 * r2)
    a = {"matern12": 1.0, "matern32": math.sqrt(3.0), "matern52": math.sqrt(5.0)}[kind] * r
    return {"matern12": lambda: torch.exp(-r), "matern32": lambda: (1.0 + a) * torch.exp(-a),
            "matern52": lambda: (1.0 + a + a * a / 3.0) * torch.exp(-a)}[kind]()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["matern12", "matern32", "matern52"])
def test_matern_root_equals_the_masked_root_bit_for_bit(kind, dtype):
    """Values and lengthscale gradients of the Matern kernels on blocks with zero distances
    (the diagonal, repeated points) equal those of the masked root exactly."""
    from geogpvae.gp.kernels import sqdiff_to_sqdist

    gen = torch.Generator().manual_seed(1)
    pts = torch.rand(40, 6, 2, generator=gen, dtype=dtype)
    pts[:, 3] = pts[:, 1]  # a repeated point: zero distances off the diagonal too
    sqdiff = (pts.unsqueeze(-2) - pts.unsqueeze(-3)).square()
    weights = torch.rand(40, 2, 6, 6, generator=gen, dtype=dtype)
    results = []
    for kernel in (kernel_from_sqdist, _masked_kernel):
        ls = torch.tensor([[0.3, 0.7], [1.1, 0.2]], dtype=dtype, requires_grad=True)
        cov = kernel(sqdiff_to_sqdist(sqdiff, ls), kind)
        (cov * weights).sum().backward()
        results.append((cov.detach(), ls.grad))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    assert torch.all(results[0][0].diagonal(dim1=-2, dim2=-1) == 1.0) and torch.all(results[0][0][:, :, 1, 3] == 1.0)


def test_lengthscales_are_learnt_relative_to_their_start_and_old_state_loads():
    k = LatentKernel("rbf", 2, 2, lengthscale=[[300.0, 30.0], [0.3, 3.0]])
    torch.testing.assert_close(k.lengthscale, torch.tensor([[300.0, 30.0], [0.3, 3.0]]))
    # raw is the log of the ratio to the start: 0 for every start, whatever the units
    torch.testing.assert_close(k.raw_lengthscale, torch.zeros(2, 2))
    with torch.no_grad():
        k.raw_lengthscale += math.log(2.0)  # one step changes every lengthscale by the same factor
    torch.testing.assert_close(k.lengthscale, torch.tensor([[600.0, 60.0], [0.6, 6.0]]))
    # a model saved before the unit existed stored softplus^-1(lengthscale) and no unit
    old = {"raw_lengthscale": torch.log(torch.expm1(torch.tensor([[0.5, 2.0], [1.0, 4.0]]))),
           "raw_outputscale": k.raw_outputscale.detach().clone()}
    k.load_state_dict(old)
    torch.testing.assert_close(k.lengthscale, torch.tensor([[0.5, 2.0], [1.0, 4.0]]))


def test_stretched_lengthens_every_lengthscale_and_restores_the_kernel_bit_for_bit():
    from geogpvae.gp.kernels import stretchable, stretched

    k = LatentKernel("matern32", 3, 2, lengthscale=0.3)
    with torch.no_grad():
        k.raw_lengthscale.copy_(torch.randn(3, 2))
    before = k.lengthscale.detach().clone()
    x = torch.rand(6, 2)
    with stretched(k, 2.5):
        torch.testing.assert_close(k.lengthscale, 2.5 * before)
        inside = k.blocks(x)
    assert torch.equal(k.lengthscale, before)
    reference = LatentKernel("matern32", 3, 2, lengthscale=0.3)
    with torch.no_grad():
        reference.raw_lengthscale.copy_(k.raw_lengthscale + math.log(2.5))
        reference.raw_outputscale.copy_(k.raw_outputscale)
    torch.testing.assert_close(inside, reference.blocks(x))
    with pytest.raises(RuntimeError), stretched(k, 4.0):
        raise RuntimeError("a failure inside the block")
    assert torch.equal(k.lengthscale, before)  # restored on the way out of an error too
    assert stretchable(k) and not stretchable(torch.nn.Linear(2, 2))


def test_a_stretch_is_seen_only_by_its_thread_and_never_by_a_copy():
    """A dask worker sends a model to another while it predicts with the kernel stretched: the copy
    must be the kernel as it is."""
    import copy
    import pickle
    import threading

    from geogpvae.gp.kernels import stretch_of, stretched

    k = LatentKernel("rbf", 2, 2, lengthscale=0.3)
    before = k.lengthscale.detach().clone()
    seen = {}
    with stretched(k, 4.0), stretched(k, 2.0):  # nested: the factors multiply
        assert stretch_of(k) == 8.0
        torch.testing.assert_close(k.lengthscale, 8.0 * before)
        thread = threading.Thread(target=lambda: seen.setdefault("other", k.lengthscale.detach().clone()))
        thread.start()
        thread.join()
        for twin in (pickle.loads(pickle.dumps(k)), copy.deepcopy(k)):
            assert torch.equal(twin.lengthscale, before)
        state = {name: t.clone() for name, t in k.state_dict().items()}
    assert torch.equal(seen["other"], before) and stretch_of(k) == 1.0
    fresh = LatentKernel("rbf", 2, 2, lengthscale=0.3)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.lengthscale, before)
