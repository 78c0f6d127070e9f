import numpy as np
import pytest
import torch

from geogpvae.engine.core import GPVAEEngine
from geogpvae.gp.rows import take_rows


def test_take_rows_is_a_gather_with_the_same_gradient():
    torch.manual_seed(0)
    t = torch.randn(50, 3, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 50, (40, 6))
    got = take_rows(t, index)
    np.testing.assert_array_equal(got.detach().numpy(), t[index].detach().numpy())
    weights = torch.randn(40, 6, 3, dtype=torch.float64)
    (grad_rows,) = torch.autograd.grad((got * weights).sum(), t)
    (grad_index,) = torch.autograd.grad((t[index] * weights).sum(), t)
    np.testing.assert_allclose(grad_rows.numpy(), grad_index.numpy(), rtol=1e-12, atol=1e-12)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_a_fit_in_large_batches_on_two_threads_is_reproducible(two_threads):
    """The same fit twice gives the same weights bit for bit, where the gathers of the
    neighbours' posteriors are large enough for torch to sum their gradients in parallel
    (advanced indexing did so in no fixed order: SPE10 differed in the fourth digit)."""
    rng = np.random.default_rng(0)
    x = rng.random((3000, 2))
    values = np.column_stack([np.sin(6 * x[:, 0]), np.cos(5 * x[:, 1]), x.sum(1)]) + 0.05 * rng.normal(size=(3000, 3))
    values[rng.random(values.shape) < 0.3] = np.nan
    weights = []
    for _ in range(2):
        eng = GPVAEEngine(engine="spa", neighbours=20, batch_size=1500, epochs=2, beta=1.0, calibrate=False,
                          progress=False, seed=0).fit(x, values)
        weights.append({k: v.clone() for k, v in eng.model.state_dict().items()})
    for name, first in weights[0].items():
        assert torch.equal(first, weights[1][name]), name
