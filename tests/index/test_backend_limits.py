"""What every backend does with extreme constants, coefficients and sizes: the exact answer
(64-bit indices where they fit) or a clear refusal naming the backend, before allocating.

Triton runs in its CPU interpreter here (tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tadiff.errors import InputError
from tadiff.index.compile import kernel
from tadiff.index.function import define

BACKENDS = ["numpy", "numba", "triton", "auto"]
BIG = 10**12
HUGE = 10**20


def _run(f, arrays, backend):
    if backend == "triton":
        pytest.importorskip("triton")
        pytest.importorskip("torch")
    if backend == "numba":
        pytest.importorskip("numba")
    shapes = {a: arrays[a].shape for a in f.args}
    return kernel(f, shapes, np.float64, backend)({a: arrays[a] for a in f.args})


@pytest.mark.parametrize("backend", BACKENDS)
def test_infinite_and_nan_constants(backend):
    f = define("y[i] = minimum(x[i], inf) + maximum(x[i], -1e999) + where(i == 2, nan, 0)")
    x = np.array([1.0, -2.0, 3.0])
    got = _run(f, {"x": x}, backend)
    np.testing.assert_array_equal(got, f.reference(x=x))  # 2x, or nan: exact in every order
    assert np.isnan(got[2]) and got[:2].tolist() == [2.0, -4.0]


# Triton's pow takes log|a| at a = 0 before it selects the exact 0**2 = 0
@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_used_as_a_number_inside_a_sum(backend):
    f = define("s[] = sum[k](x[k] * k) + sum[k=0:3](k * k)")
    x = np.array([1.0, 2.0, 3.0])
    assert float(_run(f, {"x": x}, backend)) == 8.0 + 5.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_coefficients_of_10_to_the_12_are_exact(backend):
    # i == j (a delta) and (i - j) % 5 == 0 (no delta to pin): the index reaches 2 * 10**12
    # where it is not read; 64-bit arithmetic, no 29 TiB padding (the NumPy lowering clamps)
    x = np.arange(3.0)
    for cond in ("i == j", "(i - j) % 5 == 0"):
        f = define(f"y[i:3, j:3] = where({cond}, x[{BIG}*i - {BIG}*j + i], 0)")
        np.testing.assert_array_equal(_run(f, {"x": x}, backend), np.diag(x), err_msg=cond)
    g = define(f"y[i:3] = sum[j=0:3](where((i - j) % 7 == 0, x[{BIG}*i - {BIG}*j + i], 0))")
    np.testing.assert_array_equal(_run(g, {"x": x}, backend), x)
    h = define(f"y[i:2] = sum[k={BIG}:{BIG}+2](x[k - {BIG} + i])")  # sum bounds near 10**12
    np.testing.assert_array_equal(_run(h, {"x": x}, backend), [1.0, 3.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_coefficients_beyond_64_bits_are_refused_by_name(backend):
    f = define(f"y[i:3, j:3] = where((i - j) % 5 == 0, x[{HUGE}*i - {HUGE}*j + i], 0)")
    x = np.arange(3.0)
    with pytest.raises(InputError, match=rf"backend '{backend}'\) compute indices in 64-bit"):
        _run(f, {"x": x}, backend)
    np.testing.assert_array_equal(f.reference(x=x), np.diag(x))  # exact integers


def test_outputs_and_arguments_larger_than_memory_are_refused_before_allocating():
    f = define("y[i:100000000000000000] = x[0]")
    with pytest.raises(InputError, match=r"output y of shape \(100000000000000000,\)"):
        f.reference(x=np.ones(1))
    with pytest.raises(InputError, match=r"output y of shape \(100000000000000000,\)"):
        f(x=np.ones(1))
    g = define("y[i:2] = x[i]")
    view = np.broadcast_to(np.ones(1), (10**15,))  # no memory behind it
    with pytest.raises(InputError, match=r"argument x of shape \(1000000000000000,\)"):
        g(x=view)
