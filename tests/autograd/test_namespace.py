"""``tadiff`` as the array namespace of its Tensors: xp-generic kernels run on Tensors and are
differentiated by the engine."""

import numpy as np

import tadiff as td
from tadiff._array import namespace


def _stable_logsumexp(x):
    """A kernel written once against ``xp`` (NumPy, torch or tadiff)."""
    xp = namespace(x)
    m = xp.max(x) if xp is not np else np.max(x)
    return xp.log(xp.sum(xp.exp(x - m))) + m


def test_namespace_of_tensor_is_tadiff():
    assert namespace(td.ones(2)) is td
    assert namespace(np.ones(2), td.ones(2)) is td


def test_xp_kernel_runs_on_arrays_and_tensors_with_gradients():
    a = np.array([0.5, -1.0, 2.0])
    x = td.tensor(a, requires_grad=True)
    out = _stable_logsumexp(x)
    np.testing.assert_allclose(out.data, _stable_logsumexp(a))
    out.backward()
    soft = np.exp(a) / np.exp(a).sum()
    np.testing.assert_allclose(x.grad.data, soft)  # the max's gradient cancels out


def test_numpy_like_functions_exported():
    names = "exp log sqrt sum matmul einsum where maximum minimum abs stack concatenate moveaxis"
    names += " triu tril zeros ones eye arange reshape transpose swapaxes flip float32 float64"
    for name in names.split():
        assert hasattr(td, name), name


def test_no_grad_decorator_without_parentheses():
    @td.no_grad
    def double(t):
        return t * 2

    x = td.ones(2, requires_grad=True)
    assert not double(x).requires_grad
    assert (x * 2).requires_grad
