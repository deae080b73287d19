"""Bad input raises tadiff errors naming what is at fault — never a crash deep inside NumPy."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import DTypeError, IndexingError, InputError, ShapeError


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: td.ones(2, 3) @ td.ones(2, 3), ShapeError, r"\(2, 3\) and \(2, 3\)"),
        (lambda: td.matmul(td.tensor(1.0), td.ones(2)), ShapeError, "at least 1D"),
        (lambda: td.ones(6).reshape(4, 2), ShapeError, r"shape '\[4, 2\]' is invalid for input of size 6"),  # noqa: E501
        (lambda: td.ones(2, 3).sum(dim=2), InputError, r"Dimension out of range .* got 2"),
        (lambda: td.ones(2, 3).sum(dim=(0, 0)), InputError, "appears multiple times"),
        (lambda: td.cat([td.ones(2, 3), td.ones(3, 3)], dim=1), ShapeError, "tensor number 1"),
        (lambda: td.stack([td.ones(2), td.ones(3)]), ShapeError, r"\[3\] at entry 1"),
        (lambda: td.ones(3)[5], IndexingError, "index 5 is out of bounds"),
        (lambda: td.ones(3)[1.5], IndexingError, "unsupported index 1.5"),
        (lambda: td.ones(2, 3).expand(2, 4), ShapeError, r"expanded size of the tensor \(4\)"),
        (lambda: td.ones(2, 3).permute(0, 0), InputError, "not a permutation"),
        (lambda: td.gather(td.ones(2, 2), 1, td.tensor([[2, 0]])), IndexingError, "index 2 is out of bounds for dimension 1"),  # noqa: E501
        (lambda: td.gather(td.ones(2, 2), 1, td.tensor([0, 1])), ShapeError, "same number of dimensions"),  # noqa: E501
        (lambda: td.einsum("ij,jk->ik", td.ones(2, 3)), InputError, "names 2 operands but 1"),
        (lambda: td.einsum("ijk->i", td.ones(2, 3)), ShapeError, "3 letters but the operand has 2 dims"),  # noqa: E501
        (lambda: td.einsum("ij,jk->ik", td.ones(2, 3), td.ones(2, 2)), ShapeError, "operand shapes"),  # noqa: E501
        (lambda: td.split(td.ones(4), [1, 2]), ShapeError, "sum exactly to 4"),
        (lambda: td.zeros(0).amax(), InputError, "non-empty"),
        (lambda: td.softmax(td.ones(3)), InputError, "dim"),
        (lambda: td.tensor([1, 2], requires_grad=True), DTypeError, "floating point dtype"),
        (lambda: td.where(td.ones(2), 1.0, 2.0), DTypeError, "boolean"),
        (lambda: td.exp("x"), DTypeError, "exp.. argument must be a Tensor"),
        (lambda: td.norm(td.ones(2), p=-1), InputError, "unsupported order"),
        (lambda: td.clamp(td.ones(2)), DTypeError, "min.*max"),
    ],
)  # fmt: skip
def test_bad_input_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_errors_are_builtin_subclasses():
    with pytest.raises(ValueError):
        td.ones(6).reshape(4, 2)
    with pytest.raises(IndexError):
        td.ones(3)[7]


def test_item_and_bool_of_multi_element_tensor():
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        td.ones(2).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(td.ones(2))
    assert td.tensor([3.0]).item() == 3.0


def test_numpy_interop():
    t = td.tensor([1.0, 2.0])
    assert np.asarray(t) is t.data and t.numpy() is t.data
    r = np.ones(2) * t  # NumPy defers to Tensor's reflected operator
    assert isinstance(r, td.Tensor)
