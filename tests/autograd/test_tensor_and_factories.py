"""Tensor basics and factories: dtypes like torch, copies, seeds, repr, properties."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import AutogradError, DataError, DTypeError, InputError


def test_factory_dtypes_follow_torch_defaults_and_arrays_keep_theirs():
    assert td.tensor([1.0, 2.0]).dtype == np.float32
    assert td.tensor([1, 2]).dtype == np.int64
    assert td.tensor(np.zeros(2)).dtype == np.float64
    assert td.tensor([True]).dtype == np.bool_
    assert td.zeros(2, 3).dtype == np.float32 and td.zeros(2, 3).shape == (2, 3)
    assert td.ones((2, 3), dtype="float64").dtype == np.float64
    assert td.full((2,), 3).dtype == np.int64 and td.full((2,), 3.5).dtype == np.float32
    assert td.arange(4).dtype == np.int64 and td.arange(0.0, 1.0, 0.25).shape == (4,)
    np.testing.assert_array_equal(td.linspace(0, 1, 5).data, np.linspace(0, 1, 5, dtype=np.float32))
    np.testing.assert_array_equal(td.eye(2, 3).data, np.eye(2, 3))


def test_tensor_copies_its_input():
    a = np.zeros(2)
    t = td.tensor(a)
    a[0] = 5
    assert t.data[0] == 0


def test_manual_seed_makes_rand_reproducible():
    td.manual_seed(3)
    a, b = td.rand(3), td.randn(2, 2)
    td.manual_seed(3)
    np.testing.assert_array_equal(a.data, td.rand(3).data)
    np.testing.assert_array_equal(b.data, td.randn(2, 2).data)
    assert td.randn_like(b).shape == (2, 2) and td.rand_like(a).dtype == np.float32


def test_like_factories_take_shape_and_dtype():
    x = td.tensor(np.ones((2, 3)), requires_grad=True)
    z = td.zeros_like(x)
    assert z.shape == (2, 3) and z.dtype == np.float64 and not z.requires_grad
    assert td.ones_like(x, requires_grad=True).requires_grad
    assert td.full_like(x, 7).data.max() == 7


def test_repr_like_torch():
    assert repr(td.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(td.tensor(1.0, requires_grad=True)) == "tensor(1., requires_grad=True)"
    assert repr(td.tensor([1.0], dtype="float64")) == "tensor([1.], dtype=float64)"
    x = td.tensor(2.0, requires_grad=True)
    assert repr(x * x) == "tensor(4., grad_fn=<MulBackward0>)"


def test_properties_and_conversions():
    x = td.tensor([[1.0, 2.0, 3.0]])
    assert x.shape == (1, 3) and x.ndim == 2 and x.numel() == 3 and x.size(1) == 3
    assert x.dim() == 2 and len(x) == 1 and x.device == "cpu"
    assert x.tolist() == [[1.0, 2.0, 3.0]] and float(x[0, 1]) == 2.0
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert [r.tolist() for r in td.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]


def test_requires_grad_rules():
    x = td.tensor([1.0])
    assert x.requires_grad_() is x and x.requires_grad and x.is_leaf
    y = x * 2
    with pytest.raises(AutogradError, match="only change requires_grad flags of leaf"):
        y.requires_grad_(False)
    with pytest.raises(DTypeError, match="floating point dtype"):
        td.arange(3).requires_grad_()
    with pytest.raises(DTypeError, match="real floating point"):
        td.tensor(np.ones(2, np.complex128), requires_grad=True)
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.data is y.data


def test_factory_errors():
    with pytest.raises(InputError, match="negative dimension"):
        td.zeros(-1)
    with pytest.raises(InputError, match="step must be nonzero"):
        td.arange(0, 1, 0)
    with pytest.raises(DTypeError, match="unknown dtype"):
        td.zeros(2, dtype="notatype")


BAD_DATA = {  # data, what the message must name
    "ragged rows": ([[1.0, 2.0], [3.0]], r"length 2 at dim 1 .*index \[1\] has length 1"),
    "ragged deeper": ([[[1.0], [2.0]], [[3.0], [4.0, 5.0]]], r"dim 2 .*index \[1, 1\] has length 2"),  # noqa: E501
    "a number beside a list": ([1.0, [2.0]], r"index \[0\] holds float 1.0 where index \[1\]"),
    "ragged tuples": (((1, 2), (3,)), r"index \[1\] has length 1"),
    "tensors of different lengths": ("tensors", r"length 2 at dim 1 .*index \[1\] has length 3"),
    "strings": (["a", "b"], r"element 'a' at index \[0\] is a str"),
    "a string among numbers": ([1.0, "a"], r"element 'a' at index \[1\] is a str"),
    "a string": ("abc", r"element 'abc' is a str"),
    "an array of strings": (np.array(["a", "b"]), r"array of dtype <U1 holds no numbers"),
    "an array of bytes": (np.array([b"a"]), r"array of dtype \|S1 holds no numbers"),
    "an object array": (np.array([1, None], dtype=object), "array of dtype object"),
    "None in a list": ([1.0, None], r"element None at index \[1\] is a NoneType"),
    "a dict": ({"a": 1}, "is a dict"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD_DATA))
def test_tensor_names_the_element_that_is_no_number_and_raises_like_torch(name):
    torch = pytest.importorskip("torch")
    data, match = BAD_DATA[name]
    tensors = isinstance(data, str) and data == "tensors"
    ours = [td.ones(2), td.ones(3)] if tensors else data
    theirs = [torch.ones(2), torch.ones(3)] if tensors else data
    with pytest.raises(Exception) as raised:
        torch.tensor(theirs)
    caught = next(c for c in type(raised.value).__mro__ if c.__module__ == "builtins")
    with pytest.raises(DataError, match=match) as ours_raised:
        td.tensor(ours)
    assert isinstance(ours_raised.value, caught)


def test_numeric_strings_are_refused_even_with_a_dtype():
    with pytest.raises(DataError, match=r"'1\.5' at index"):
        td.tensor(["1.5"], dtype=td.float32)  # torch refuses too; NumPy would parse it


def test_ragged_lists_given_to_ops_and_empty_rows_are_named():
    with pytest.raises(DataError, match=r"index \[1\] has length 1"):
        td.add(td.ones(2), [[1.0, 2.0], [3.0]])
    with pytest.raises(DataError, match=r"index \[1\] has length 1"):
        td.tensor([[], [1.0]])  # torch makes a (2, 0) tensor of this; tadiff refuses it
