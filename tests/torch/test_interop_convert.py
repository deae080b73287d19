"""to_torch / from_torch: values, dtypes, shared memory on CPU, copies where sharing cannot be."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import tadiff as td  # noqa: E402
from tadiff.errors import DTypeError  # noqa: E402
from tadiff.torch import from_torch, to_torch  # noqa: E402

DTYPES = ["float32", "float64", "int32", "int64", "int8", "uint8", "bool", "complex64", "float16"]


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(0, 4), min_size=0, max_size=3),
    seed=st.integers(0, 1000),
)
def test_round_trip_keeps_values_dtype_and_memory(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    arr = (rng.normal(size=shape) * 10).astype(dtype)
    a = td.tensor(arr)
    t = to_torch(a)
    assert tuple(t.shape) == arr.shape
    assert t.numpy().dtype == arr.dtype
    np.testing.assert_array_equal(t.numpy(), arr)
    back = from_torch(t)
    assert back.dtype == arr.dtype
    np.testing.assert_array_equal(back.data, arr)
    if arr.size:
        assert np.shares_memory(back.data, a.data)  # CPU: no copy either way


def test_writes_are_visible_across_engines_on_cpu():
    a = td.tensor(np.zeros((2, 3)))
    t = to_torch(a)
    t[1, 2] = 5.0
    assert a.data[1, 2] == 5.0
    b = from_torch(t)
    b.data[0, 0] = -1.0
    assert float(t[0, 0]) == -1.0


def test_non_contiguous_views_share_memory_and_negative_strides_copy():
    base = np.arange(12.0).reshape(3, 4)
    t = to_torch(base.T)  # positive strides: a view
    assert t.stride() == (1, 4) and np.shares_memory(t.numpy(), base)
    flipped = base[::-1, ::2]
    tf = to_torch(flipped)  # torch cannot view negative strides: a correct copy
    np.testing.assert_array_equal(tf.numpy(), flipped)
    assert not np.shares_memory(tf.numpy(), base)


def test_read_only_and_big_endian_arrays_are_copied_correctly():
    ro = np.arange(4.0)
    ro.flags.writeable = False
    t = to_torch(ro)
    t[0] = 9.0  # the copy is writable; the original is untouched
    assert ro[0] == 0.0
    be = np.arange(3, dtype=">f8")
    np.testing.assert_array_equal(to_torch(be).numpy(), [0.0, 1.0, 2.0])


def test_requires_grad_makes_detached_leaves():
    x = td.tensor(np.ones(3), requires_grad=True)
    y = x * 2  # a non-leaf in tadiff's graph
    t = to_torch(y, requires_grad=True)
    assert t.is_leaf and t.requires_grad and t.grad_fn is None
    (t * t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), 2 * y.data)
    assert x.grad is None  # gradients do not cross engines
    assert not to_torch(y).requires_grad

    s = torch.ones(2, dtype=torch.float64, requires_grad=True)
    u = s * 3
    v = from_torch(u)
    assert not v.requires_grad and v.grad_fn is None
    w = from_torch(u, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.data, [6.0, 6.0])
    assert s.grad is None


def test_numpy_arrays_and_conjugate_views():
    arr = np.arange(3.0)
    assert np.shares_memory(to_torch(arr).numpy(), arr)
    z = torch.tensor([1 + 2j, 3 - 1j]).conj()  # a lazy conjugate view is resolved
    np.testing.assert_array_equal(from_torch(z).data, np.array([1 - 2j, 3 + 1j], np.complex64))


def test_errors_name_the_value_and_dtype():
    with pytest.raises(DTypeError, match=r"expected a tadiff Tensor or a numpy.ndarray, got list"):
        to_torch([1.0, 2.0])
    with pytest.raises(DTypeError, match="dtype object has no torch equivalent"):
        to_torch(np.array([object()]))
    with pytest.raises(DTypeError, match="requires_grad=True needs a floating dtype, got int64"):
        to_torch(np.arange(3), requires_grad=True)
    with pytest.raises(DTypeError, match=r"expected a torch.Tensor, got ndarray"):
        from_torch(np.ones(2))
    with pytest.raises(DTypeError, match=r"torch.bfloat16 has no NumPy equivalent"):
        from_torch(torch.ones(2, dtype=torch.bfloat16))
