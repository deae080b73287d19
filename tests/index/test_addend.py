"""Definitions that add terms to a contraction (a bias): ``y = c[o] + sum[...](...)``.

* The loop nests start each output block from the addend and accumulate the sums into it (the
  orders of a plain contraction), instead of computing the sums per output element.
* The NumPy kernels keep the contraction's BLAS plan (im2col, window-unrolled, product-first)
  and add the addend to its result; the automatic backend choice is the contraction's.
* What they compute is checked against the reference interpreter, on every backend and on the
  sizes that select each NumPy plan; the corpora of ``test_derive`` and ``test_schedule`` hold
  such definitions too, for the derivatives and the cost bound.
* Single-array reductions (a bias's gradient, ``dc[o] = sum[b, i, j](dy[b, o, i, j])``) are
  BLAS sums, equal to NumPy's.
"""

from __future__ import annotations

import numpy as np
import pytest

from tadiff.index import define
from tadiff.index.compile import kernel
from tadiff.index.compile.loops import root_addend
from tadiff.index.compile.lower import stage_backends
from tadiff.index.compile.numba_backend import run_in_python
from tadiff.index.compile.schedule import plan_program
from tadiff.index.compile.vectorized import Kernel, with_addend

CONV = "y[b,o,h,v] = sum[k,i,j](x[b,k,h+i,v+j] * w[o,k,i,j])"
BIASED = "y[b,o,h,v] = c[o] + sum[k,i,j](x[b,k,h+i,v+j] * w[o,k,i,j])"

# (x, w) shapes that select each plan of the NumPy backend for the convolution
GEOMETRIES = {
    "one input channel (loops)": ((4, 1, 10, 10), (3, 1, 3, 3)),
    "im2col": ((6, 8, 10, 10), (16, 8, 3, 3)),
    "window-unrolled": ((2, 32, 12, 12), (32, 32, 3, 3)),
}


def _convolution(x, w, c):
    """The oracle: every window as a view, one einsum in float64, the bias added (the reference
    interpreter takes minutes on the window-unrolled geometry)."""
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("bkhvij,okij->bohv", windows, w) + c[:, None, None]


def _arrays(x_shape, w_shape, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal(x_shape),
        "w": rng.standard_normal(w_shape),
        "c": rng.standard_normal(w_shape[0]),
    }


def test_root_addend_splits_off_every_term_without_the_sum():
    def split(source):
        found = root_addend(define(source).body)
        return None if found is None else tuple(map(str, found))

    assert split("y[i] = a[i] + sum[k](x[i, k])") == ("a[i]", "sum[k=0:x.shape[1]](x[i, k])")
    assert split("y[i] = sum[k](x[i, k]) * 2 - a[i] + b[i]") == (
        "-a[i] + b[i]",
        "2 * sum[k=0:x.shape[1]](x[i, k])",
    )
    negated = split("y[i] = a[i] - 3 * sum[k](x[i, k])")
    assert negated == ("a[i]", "-(3 * sum[k=0:x.shape[1]](x[i, k]))")
    assert split("y[i] = sum[k](x[i, k])") is None  # nothing to add: a plain contraction
    assert split("y[i] = a[i] + b[i]") is None  # no sum
    assert split("y[i] = exp(sum[k](x[i, k])) + a[i]") is None  # the sum is not a factor


def test_a_bias_starts_the_output_then_the_sums_accumulate_into_it():
    shapes = {"x": (32, 1, 18, 18), "w": (8, 1, 3, 3), "c": (8,)}
    (stage,) = plan_program(define(BIASED), shapes, np.float64).stages
    nest = stage.nest
    assert nest.accumulate and not nest.zero_fill and str(nest.addend) == "c[o]"
    assert nest.order == ("b", "k", "i", "j", "o", "h", "v")
    # the addend is stored inside the batch loop, before the sums add into that block
    text = nest.text().splitlines()
    store = next(n for n, line in enumerate(text) if "y[b, o, h, v] = t" in line)
    first_sum = next(n for n, line in enumerate(text) if line.strip().startswith("for k in"))
    assert text[0].startswith("for b in") and store < first_sum
    # a block of stores more than the plain convolution, nothing recomputed per element
    (plain,) = plan_program(define(CONV), {"x": shapes["x"], "w": shapes["w"]}, np.float64).stages
    assert nest.ops == plain.nest.ops
    assert nest.stores == pytest.approx(plain.nest.stores + 32 * 8 * 16 * 16)
    explained = define(BIASED).explain(**shapes)
    assert "output set to c[o], then accumulated inside the sums" in explained


@pytest.mark.parametrize(
    "source",
    [BIASED, "z[i,j] = 2*u[i] - sum[k](x[i,k] * w[k,j]) + sum[k](x[i,k])"],
)
def test_nests_starting_from_the_addend_compute_what_the_interpreter_computes(source):
    f = define(source)
    rng = np.random.default_rng(1)
    shapes = (
        {"x": (2, 3, 6, 5), "w": (4, 3, 2, 3), "c": (4,)}
        if "c[o]" in source
        else {"u": (3,), "x": (3, 4), "w": (4, 5)}
    )
    arrays = {n: rng.standard_normal(shapes[n]) for n in f.args}
    program = plan_program(f, shapes, np.float64)
    assert program.stages[-1].nest.addend is not None
    np.testing.assert_allclose(
        run_in_python(program, arrays), f.reference(**arrays), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("backend", ["auto", "numpy", "numba"])
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_biased_kernels_match_the_interpreter(geometry, backend, dtype):
    if backend == "numba":
        pytest.importorskip("numba")
    f = define(BIASED)
    arrays = _arrays(*GEOMETRIES[geometry])
    typed = {n: a.astype(dtype) for n, a in arrays.items()}
    kept = {n: a.copy() for n, a in typed.items()}
    k = kernel(f, {n: a.shape for n, a in typed.items()}, dtype, backend)
    got = k(typed)
    assert got.dtype == dtype and got.flags.c_contiguous
    expected = _convolution(**{n: a.astype(np.float64) for n, a in typed.items()})
    tol = 1e-11 if dtype == np.float64 else 1e-4  # float32: 72 to 288 terms of N(0, 1) products
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    for n, a in typed.items():  # the kernel adds into its own result, never into an argument
        np.testing.assert_array_equal(a, kept[n])


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_a_bias_keeps_the_backend_and_plan_of_its_convolution(geometry):
    pytest.importorskip("numba")
    x_shape, w_shape = GEOMETRIES[geometry]
    shapes = {"x": x_shape, "w": w_shape, "c": w_shape[:1]}
    plain = plan_program(define(CONV), {"x": x_shape, "w": w_shape}, np.float64)
    biased = plan_program(define(BIASED), shapes, np.float64)
    assert stage_backends(biased, "auto") == stage_backends(plain, "auto")
    k = kernel(define(BIASED), shapes, backend="numpy")
    assert k.source.endswith("then c[o] added")
    if geometry == "window-unrolled":
        assert "window-unrolled BLAS products" in k.source


def test_the_addend_goes_into_a_copy_of_a_result_it_does_not_own():
    # an inner kernel returning an argument itself (as a view-returning plan could): the
    # addition must not write into the caller's array
    f = define("y[i, j] = c[j] + sum[k](a[i, k, j])")
    shapes = {"a": (3, 2, 4), "c": (4,)}
    addend, _ = root_addend(f.body)
    leaked = np.arange(12.0).reshape(3, 4)
    inner = Kernel("numpy", lambda arrays: leaked, (3, 4), np.float64, "an inner plan")
    k = with_addend(inner, f, addend, shapes, np.float64, (3, 4))
    c = np.array([1.0, 2.0, 3.0, 4.0])
    got = k({"a": np.zeros((3, 2, 4)), "c": c, "leaked": leaked})
    np.testing.assert_array_equal(got, np.arange(12.0).reshape(3, 4) + c)
    np.testing.assert_array_equal(leaked, np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize(
    ("source", "axes", "scale"),
    [
        ("s[o] = sum[b,i,j](x[b,o,i,j])", (0, 2, 3), 1),  # a convolution's bias gradient
        ("s[b,o] = sum[i,j](x[b,o,i,j])", (2, 3), 1),
        ("s[o] = sum[b,i,j,k=0:3](x[b,o,i,j])", (0, 2, 3), 3),  # k in no factor: counted
        ("s[o,b] = sum[i,j](x[b,o,i,j])", None, 1),  # transposed: einsum's
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_single_array_sums_are_blas_sums(source, axes, scale, dtype):
    f = define(source)
    shape = (8, 5, 6, 7)
    x = np.random.default_rng(2).standard_normal(shape).astype(dtype)
    k = kernel(f, {"x": shape}, dtype)
    got = k({"x": x})
    expected = f.reference(x=x.astype(np.float64))
    assert got.dtype == dtype and got.shape == expected.shape
    # float32: sums of up to 336 terms of N(0, 1), each rounded at most once per addition
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * 40)
    if axes is None:
        assert "einsum" in k.source
        return
    assert k.source == f"a sum of x over axes {axes}"
    np.testing.assert_allclose(got, scale * x.sum(axis=axes), rtol=tol, atol=tol * 40)
    # a strided view (an incoming gradient often is one) sums the same
    strided = np.repeat(x, 2, axis=3)[..., ::2]
    np.testing.assert_allclose(k({"x": strided}), got, rtol=tol, atol=tol * 40)
