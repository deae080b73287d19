"""Range inference, static bounds checking, call errors, and forward values against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from tadiff.errors import BoundsError, DTypeError, InputError, ParseError, ShapeError
from tadiff.index.function import define

rng = np.random.default_rng(7)


# -- forward values against NumPy ----------------------------------------------------------------


def test_matmul_and_batched_matmul():
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    np.testing.assert_allclose(define("z[i,j] = sum[k](x[i,k] * w[k,j])")(x=x, w=w), x @ w)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))
    f = define("z[n,i,j] = sum[k](a[n,i,k] * b[n,k,j])")
    np.testing.assert_allclose(f(a=a, b=b), a @ b)


def test_strided_convolution_against_explicit_windows():
    x, w = rng.normal(size=(2, 3, 11)), rng.normal(size=(4, 3, 3))
    y = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")(x=x, w=w)
    assert y.shape == (2, 4, 5)  # floor((11 - 3) / 2) + 1
    expected = np.stack(
        [np.einsum("bck,ock->bo", x[:, :, 2 * t : 2 * t + 3], w) for t in range(5)], axis=-1
    )
    np.testing.assert_allclose(y, expected)


def test_flatten_diagonal_trace_reversal_prefix_sum_pooling():
    x = rng.normal(size=12)
    np.testing.assert_array_equal(define("f[s, t:4] = x[4*s+t]")(x=x), x.reshape(3, 4))
    c = rng.normal(size=(3, 3))
    np.testing.assert_array_equal(define("y[i] = c[i,i]")(c=c), np.diag(c))
    np.testing.assert_allclose(define("t[] = sum[i](c[i,i])")(c=c), np.trace(c))
    np.testing.assert_array_equal(define("y[i] = x[11-i]")(x=x), x[::-1])
    np.testing.assert_allclose(define("y[i:12] = sum[k=0:i+1](x[k])")(x=x), np.cumsum(x))
    np.testing.assert_array_equal(
        define("y[i] = maximum(x[2*i], x[2*i+1])")(x=x), x.reshape(6, 2).max(axis=1)
    )


def test_issue_example_against_broadcasting():
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    c, d = rng.normal(size=(2, 2)), rng.normal(size=(5,))
    f = define("f[i,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] + d[i+k]**3))")
    window = np.stack([d[i : i + 3] for i in range(2)])  # d[i+k]
    inner = (a[:, None, :] + b[None, :, :]) ** 2 * np.diag(c)[:, None, None]
    expected = np.exp(-(inner + window[:, None, :] ** 3).sum(-1))
    np.testing.assert_allclose(f(a=a, b=b, c=c, d=d), expected)


def test_sum_range_from_strided_single_variable_access():
    d = rng.normal(size=7)
    # 0 <= 2*k + 1 <= 6  ->  k = 0, 1, 2
    np.testing.assert_allclose(define("s[] = sum[k](d[2*k+1])")(d=d), d[1] + d[3] + d[5])


def test_sibling_sums_with_one_name_get_their_own_ranges():
    a, b = rng.normal(size=3), rng.normal(size=5)
    s = define("s[] = sum[k](a[k]) + sum[k](b[k])")(a=a, b=b)
    np.testing.assert_allclose(s, a.sum() + b.sum())


def test_index_values_in_the_body():
    np.testing.assert_array_equal(define("y[i] = x[i] * (2*i + 1)")(x=np.ones(3)), [1, 3, 5])


# -- output shapes -------------------------------------------------------------------------------


def test_output_shape_inference():
    conv = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    assert conv.output_shape(x=(2, 3, 9), w=(4, 3, 3)) == (2, 4, 4)
    assert conv.output_shape(x=(2, 3, 10), w=(4, 3, 3)) == (2, 4, 4)
    assert define("y[i] = x[9-i]").output_shape(x=(10,)) == (10,)
    assert define("f[s, t:10] = x[10*s+t]").output_shape(x=(35,)) == (3, 10)


def test_output_size_that_cannot_be_inferred():
    # s alone could reach 2 (t = 0) and t alone 20 (s = 0), but not both: no largest range
    with pytest.raises(ShapeError, match="cannot infer the sizes of output indices s, t of f"):
        define("f[s,t] = x[10*s+t]")(x=np.ones(20))
    # an index that no access bounds
    with pytest.raises(ShapeError, match="cannot infer the size of output index 'j' of y"):
        define("y[i, j] = where(j == 0, x[i], 0)")(x=np.ones(3))


def test_empty_output_dimension_is_an_error():
    with pytest.raises(ShapeError, match="output index 't' of y would have size 0"):
        define("y[t] = sum[k](x[2*t+k] * w[k])")(x=np.ones(2), w=np.ones(3))


def test_sum_range_that_cannot_be_inferred():
    with pytest.raises(ParseError, match="cannot infer the range of sum index 'k'") as info:
        define("y[i] = sum[k](x[i+k])")
    assert info.value.column == 11  # at the sum's index


# -- static bounds checking ----------------------------------------------------------------------


def test_bounds_error_names_argument_expression_and_range():
    f = define("y[i:4] = x[i] + x[i+1]")
    with pytest.raises(BoundsError, match=r"x\[i \+ 1\].*takes values 1\.\.4.*shape \(4,\)"):
        f(x=np.ones(4))


def test_bounds_error_for_explicit_output_size():
    f = define("y[t:5] = sum[k](x[2*t+k] * w[k])")
    with pytest.raises(BoundsError, match=r"index 2\*t \+ k of dimension 0 takes values 0\.\.10"):
        f(x=np.ones(9), w=np.ones(3))


def test_short_d_shortens_the_output_and_explicit_sizes_are_checked():
    # i is used plainly in a and c (size 2), but d[i + k] with k < 3 is in bounds only for
    # i = 0 when d has 3 elements: the largest range for which every access is in bounds
    f = define("f[i,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] + d[i+k]**3))")
    args = {"a": np.ones((2, 3)), "b": np.ones((4, 3)), "c": np.ones((2, 2)), "d": np.ones(3)}
    assert f.reference(**args).shape == (1, 4)
    g = define("f[i:2,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] + d[i+k]**3))")
    with pytest.raises(BoundsError, match=r"access d\[i \+ k\].*takes values 0\.\.3"):
        g.reference(**args)


def test_guarded_access_is_in_bounds():
    # interval arithmetic alone would reject x[i - 1]; the exact check sees the condition
    f = define("y[i:3] = where(i >= 1, x[i-1], 0)")
    np.testing.assert_array_equal(f(x=np.array([1.0, 2.0, 3.0])), [0.0, 1.0, 2.0])
    # the inferred size is the largest that keeps x[i - 1] in bounds: i = 3 reads x[2]
    assert define("y[i] = where(i >= 1, x[i-1], 0)").output_shape(x=(3,)) == (4,)


def test_triangular_range_is_checked_exactly():
    # k <= i keeps x[i - k] in bounds although i - k spans -2..2 over the box
    f = define("y[i:3] = sum[k=0:i+1](x[i-k])")
    np.testing.assert_array_equal(f(x=np.array([1.0, 2.0, 3.0])), [1.0, 3.0, 6.0])


# -- call errors ---------------------------------------------------------------------------------


def test_mismatched_contraction_sizes():
    f = define("z[i,j] = sum[k](x[i,k] * w[k,j])")
    with pytest.raises(
        ShapeError, match=r"index 'k' runs over .*x.shape\[1\] = 3.*w.shape\[0\] = 4"
    ):
        f(x=np.ones((2, 3)), w=np.ones((4, 2)))


def test_wrong_rank_missing_and_unexpected_arguments_and_dtype():
    f = define("y[i] = x[i] * w[i]")
    with pytest.raises(
        ShapeError, match=r"argument x of y is indexed with 1 indices but has shape"
    ):
        f(x=np.ones((2, 2)), w=np.ones(2))
    with pytest.raises(InputError, match="missing w"):
        f(x=np.ones(2))
    with pytest.raises(InputError, match="unexpected v"):
        f(x=np.ones(2), w=np.ones(2), v=1)
    with pytest.raises(DTypeError, match="argument x of y must be a real number array"):
        f(x=np.ones(2, dtype=complex), w=np.ones(2))


def test_torch_tensors_are_refused_with_a_clear_error():
    torch = pytest.importorskip("torch")
    f = define("y[i] = x[i]")
    with pytest.raises(DTypeError, match="argument x of y: the reference evaluation takes NumPy"):
        f(x=torch.ones(2, requires_grad=True))


def test_printing_and_latex():
    f = define("z[i,j] = sum[k](x[i,k] * w[k,j])")
    assert str(f) == "z[i, j] = sum[k](x[i, k] * w[k, j])"  # as written: it reads back
    assert f.latex() == r"z_{i, j} = \sum_{k=0}^{N^{x}_{1} - 1} x_{i, k} \, w_{k, j}"
    assert f._repr_latex_() == f"$${f.latex()}$$"
    assert f.size_params == {"x.shape[0]", "x.shape[1]", "w.shape[1]"}
