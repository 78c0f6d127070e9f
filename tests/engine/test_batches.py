import pytest
import torch

from geogpvae.engine.batches import DENSE_UNIQUE_RATIO, sorted_unique


@pytest.mark.parametrize("size,count", [(50, 400), (1000, 21), (7, 7), (300, 300 // DENSE_UNIQUE_RATIO)])
def test_sorted_unique_equals_torch_unique(size, count):
    """Marked or sorted, the distinct values come back ascending and the inverse rebuilds the
    input: the same tensors as torch.unique, the ends of the range included."""
    gen = torch.Generator().manual_seed(size + count)
    values = torch.cat([torch.randint(size, (count,), generator=gen), torch.tensor([0, size - 1, size - 1])])
    uniq, inverse = sorted_unique(values, size)
    expected_uniq, expected_inverse = torch.unique(values, return_inverse=True)
    assert uniq.dtype == inverse.dtype == torch.int64
    assert torch.equal(uniq, expected_uniq) and torch.equal(inverse, expected_inverse)
    assert torch.equal(uniq[inverse], values)
