"""The accumulating scatter behind indexing gradients (sort + reduceat) against ``np.add.at``."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff.ops._dual import scatter_add_zeros_at


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_matches_add_at_with_repeats_negatives_and_broadcasting(data, shape, dtype):
    shape = tuple(shape)
    lead = data.draw(st.integers(1, len(shape)))
    n = data.draw(st.integers(0, 12))
    key = []
    for d in range(lead):
        values = data.draw(st.lists(st.integers(-shape[d], shape[d] - 1), min_size=n, max_size=n))
        index = np.array(values, dtype=np.int64)
        if d == 1 and n and data.draw(st.booleans()):
            index = index[:1]  # broadcasts against the others
        key.append(index)
    key = tuple(key)
    rows = np.broadcast_shapes(*(k.shape for k in key))
    g = np.random.default_rng(n).standard_normal(rows + shape[lead:]).astype(dtype)
    expected = np.zeros(shape, dtype)
    np.add.at(expected, key, g)
    magnitude = np.zeros(shape)
    np.add.at(magnitude, key, np.abs(g.astype(np.float64)))
    got = scatter_add_zeros_at(g, key, shape)
    assert got.dtype == dtype and got.shape == shape
    # the summation order differs from np.add.at's: rounding bounded by the summed magnitudes
    unit = np.finfo(dtype).eps
    assert np.all(np.abs(got.astype(np.float64) - expected) <= 4 * n * unit * magnitude + 1e-300)


def test_embedding_style_lookup_gradient_accumulates_repeated_rows():
    w = td.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    idx = np.array([[1, 3], [1, -1]])
    (w[idx] * td.tensor(np.arange(12.0).reshape(2, 2, 3))).sum().backward()
    expected = np.zeros((4, 3))
    np.add.at(expected, (idx,), np.arange(12.0).reshape(2, 2, 3))
    np.testing.assert_array_equal(w.grad.data, expected)
    assert expected[3].tolist() == [3.0 + 9.0, 4.0 + 10.0, 5.0 + 11.0]  # row 3 twice (3 and -1)
