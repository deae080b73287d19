"""Bad input raises tadiff errors naming what is at fault — never a crash deep inside NumPy."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import DTypeError, IndexingError, InputError, ShapeError, TadiffError


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: td.ones(2, 3) @ td.ones(2, 3), ShapeError, r"\(2, 3\) and \(2, 3\)"),
        (lambda: td.matmul(td.tensor(1.0), td.ones(2)), ShapeError, "at least 1D"),
        (lambda: td.ones(6).reshape(4, 2), ShapeError, r"shape '\[4, 2\]' is invalid for input of size 6"),  # noqa: E501
        (lambda: td.ones(2, 3).sum(dim=2), InputError, r"Dimension out of range .* got 2"),
        (lambda: td.ones(2, 3).sum(dim=(0, 0)), InputError, "appears multiple times"),
        (lambda: td.cat([td.ones(2, 3), td.ones(3, 3)], dim=1), ShapeError, "tensor number 1"),
        (lambda: td.cat([td.ones(2, 3), td.ones(5, 3), td.ones(2, 4)]), ShapeError, "Expected size 3 but got size 4 for tensor number 2"),  # noqa: E501
        (lambda: td.cat([td.ones(2, 3), td.ones(3)]), ShapeError, r"same number of dimensions: got 2 and 1 \(tensor number 1"),  # noqa: E501
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
        (lambda: td.exp("x"), DTypeError, "exp.. argument must be a tadiff Tensor.*got str"),
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


def _f64(m, values, **kw):
    return m.tensor(values, dtype=m.float64, **kw)


def _backward_twice(m):
    y = (_f64(m, [1.0, 2.0], requires_grad=True) ** 2).sum()
    y.backward()
    y.backward()


# The same mistake written once against a module ``m`` (tadiff or torch): torch's exception
# class is the oracle of what a PyTorch program catches.
MISTAKES = {
    "gradient of the wrong shape": lambda m: (_f64(m, [1.0, 2.0], requires_grad=True) * 2).backward(m.ones(3, dtype=m.float64)),  # noqa: E501
    "integer tensor requiring grad": lambda m: m.tensor([1, 2]).requires_grad_(),
    "integer tensor built requiring grad": lambda m: m.tensor([1, 2], requires_grad=True),
    "backward twice": _backward_twice,
    "implicit gradient of a non-scalar": lambda m: (_f64(m, [1.0, 2.0], requires_grad=True) * 2).backward(),  # noqa: E501
    "backward of a tensor without grad_fn": lambda m: _f64(m, [1.0, 2.0]).sum().backward(),
    "shapes that do not broadcast": lambda m: m.ones(2, 3) + m.ones(2),
    "comparison of shapes that do not broadcast": lambda m: m.ones(2) < m.ones(3),
    "where of shapes that do not broadcast": lambda m: m.where(m.ones(2) > 0, m.ones(3), m.ones(2)),
    "maximum of shapes that do not broadcast": lambda m: m.maximum(m.ones(2), m.ones(3)),
    "integer to a negative power": lambda m: m.tensor([2]) ** -1,
    "matmul of mismatched shapes": lambda m: m.ones(2, 3) @ m.ones(2, 3),
    "view to a wrong size": lambda m: m.ones(4).view(3),
    "cat of mismatched shapes": lambda m: m.cat([m.ones(2, 3), m.ones(2, 4)], 0),
    "index out of range": lambda m: m.ones(3)[5],
    "dim out of range": lambda m: m.ones(2, 2).sum(dim=5),
    "transpose dim out of range": lambda m: m.ones(3, 2).transpose(0, 2),
    "in-place op on a leaf requiring grad": lambda m: _f64(m, [1.0], requires_grad=True).add_(1),
    "item of several elements": lambda m: m.ones(3).item(),
    "truth value of several elements": lambda m: bool(m.ones(3)),
    "inverse of a singular matrix": lambda m: m.linalg.inv(m.zeros(2, 2)),
    "cholesky of an indefinite matrix": lambda m: m.linalg.cholesky(-m.eye(2)),
    "grad of an input that does not require grad": lambda m: m.autograd.grad((_f64(m, [1.0]) * 2).sum(), _f64(m, [1.0])),  # noqa: E501
    "retain_grad without requires_grad": lambda m: _f64(m, [1.0]).retain_grad(),
    "negative size": lambda m: m.zeros(-1),
    "len of a 0-d tensor": lambda m: len(m.tensor(1.0)),
    "iteration over a 0-d tensor": lambda m: iter(m.tensor(1.0)),
    "narrow past the end": lambda m: m.narrow(m.ones(4), 0, 3, 2),
    "topk with k too large": lambda m: m.topk(m.ones(3), 4),
    "integer mask": lambda m: m.masked_fill(m.ones(2), m.tensor([1, 0]), 0.0),
    "clamp without bounds": lambda m: m.clamp(m.ones(2)),
    "empty randint range": lambda m: m.randint(3, 3, (2,)),
    "class index out of range": lambda m: m.nn.functional.cross_entropy(m.ones(2, 3), m.tensor([0, 5])),  # noqa: E501
    "embedding index out of range": lambda m: m.nn.functional.embedding(m.tensor([7]), m.ones(3, 2)),  # noqa: E501
    "linear of mismatched shapes": lambda m: m.nn.functional.linear(m.ones(2, 3), m.ones(4, 5)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_errors_are_catchable_as_what_torch_raises(name):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        MISTAKES[name](torch)
    # torch.linalg.LinAlgError and the like: a PyTorch program catches their built-in base
    caught = next(c for c in type(theirs.value).__mro__ if c.__module__ == "builtins")
    with pytest.raises(TadiffError) as ours:
        MISTAKES[name](td)
    assert isinstance(ours.value, caught), f"{type(ours.value).__name__} is no {caught.__name__}"


def test_linalg_error_is_named_like_torch():
    with pytest.raises(td.linalg.LinAlgError, match="singular"):
        td.linalg.inv(td.zeros(2, 2))
    assert issubclass(td.linalg.LinAlgError, RuntimeError)
