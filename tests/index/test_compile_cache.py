"""The kernel cache: derivation and compilation once per (definition, shapes, dtype, backend)."""

from __future__ import annotations

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.index import define
from tadiff.index.compile import clear_cache, kernel, set_cache_limit, stats

CONV2D = "y[b,o,h,v] = sum[c,i,j](x[b,c,2*h+i,2*v+j] * w[o,c,i,j])"


def _train_step(f, x, w):
    xt, wt = td.tensor(x, requires_grad=True), td.tensor(w, requires_grad=True)
    f(x=xt, w=wt).sum().backward()
    return xt.grad, wt.grad


def test_conv2d_derives_and_compiles_once_then_only_hits_the_cache():
    clear_cache()
    f = define(CONV2D)
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 3, 9, 9)), rng.normal(size=(4, 3, 3, 3))
    _train_step(f, x, w)
    first = stats()
    assert first["derivations"] == 2  # d/dx and d/dw
    assert first["compilations"] == 3  # forward and both gradients
    assert first["by_backend"] == {"numpy": 3}
    assert first["derivation_seconds"] > 0 and first["compile_seconds"] > 0
    for _ in range(3):
        _train_step(f, x, w)
    again = stats()
    assert again["derivations"] == 2 and again["compilations"] == 3
    assert again["compile_seconds"] == first["compile_seconds"]
    # per step: the forward's kernel and the gradients' (both derivatives are one cache entry)
    assert again["cache_hits"] == first["cache_hits"] + 6
    # the same text defined again shares the kernels (the body is hash-consed)
    _train_step(define(CONV2D), x, w)
    assert stats()["compilations"] == 3


def test_new_shape_or_dtype_compiles_but_does_not_derive_again():
    clear_cache()
    f = define(CONV2D)
    rng = np.random.default_rng(1)
    w = rng.normal(size=(4, 3, 3, 3))
    _train_step(f, rng.normal(size=(1, 3, 7, 7)), w)
    _train_step(f, rng.normal(size=(1, 3, 11, 11)), w)
    s = stats()
    assert s["derivations"] == 2 and s["compilations"] == 6
    _train_step(f, rng.normal(size=(1, 3, 7, 7)).astype(np.float32), w.astype(np.float32))
    assert stats()["compilations"] == 9 and stats()["derivations"] == 2


def test_backends_are_separate_cache_entries():
    clear_cache()
    f = define("y[i] = sum[k=0:3](x[3*i+k]) / 3")
    a = kernel(f, {"x": (9,)}, np.float64, "numpy")
    b = kernel(f, {"x": (9,)}, np.float64, "auto")
    assert a is not b and stats()["compilations"] == 2 and stats()["kernels"] == 2
    assert kernel(f, {"x": (9,)}, np.float64, "numpy") is a
    clear_cache()
    assert stats()["kernels"] == 0 and stats()["compilations"] == 0


def test_cache_keeps_the_most_recently_used_kernels_up_to_its_limit():
    clear_cache()
    f = define("y[i] = sum[k=0:3](x[i+k])")
    previous = set_cache_limit(3)
    try:
        kernels = {n: kernel(f, {"x": (n,)}) for n in (5, 6, 7)}
        assert kernel(f, {"x": (5,)}) is kernels[5]  # a hit makes 5 the most recent
        kernel(f, {"x": (8,)})  # a fourth shape drops the least recently used: 6
        s = stats()
        assert s["kernels"] == 3 and s["evictions"] == 1 and s["limit"] == 3
        assert kernel(f, {"x": (5,)}) is kernels[5] and kernel(f, {"x": (7,)}) is kernels[7]
        again = kernel(f, {"x": (6,)})  # compiled again, and still right
        assert again is not kernels[6] and stats()["compilations"] == 5
        np.testing.assert_allclose(again({"x": np.arange(6.0)}), [3.0, 6.0, 9.0, 12.0])
        set_cache_limit(1)  # lowering the limit drops the oldest at once
        assert stats()["kernels"] == 1
    finally:
        set_cache_limit(previous)


def test_tensor_calls_recompile_a_kernel_dropped_from_the_cache():
    # a call remembers the cache key of its argument layout; a dropped kernel is built again
    clear_cache()
    f = define("y[i] = sum[k=0:3](x[i+k] * w[k])")
    x = td.tensor(np.arange(6.0), requires_grad=True)
    w = td.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    expected_y = [8.0, 14.0, 20.0, 26.0]  # sum_k x[i+k] w[k], worked out by hand
    expected_dx = [1.0, 3.0, 6.0, 6.0, 5.0, 3.0]  # d/dx[t] of sum_i y[i]: w's terms reaching t
    previous = set_cache_limit(1)
    try:
        for step in range(3):
            y = f(x=x, w=w)
            assert y.tolist() == expected_y
            x.grad = None
            y.sum().backward()  # its gradient kernel evicts the forward's
            assert x.grad.tolist() == expected_dx
            # the forward, then both derivatives (an entry built from two kernels), each step
            assert stats()["compilations"] == 3 * (step + 1)
    finally:
        set_cache_limit(previous)
    y = f(x=x, w=w)  # and back to hits once the cache holds both
    hits = stats()["cache_hits"]
    assert f(x=x, w=w).tolist() == y.tolist() and stats()["cache_hits"] == hits + 1


def test_tensor_calls_check_every_new_argument_layout():
    f = define("y[i] = sum[k=0:3](x[i+k] * w[k])")
    w = td.tensor(np.ones(3))
    assert f(x=td.tensor(np.ones(5)), w=w).shape == (3,)  # a layout checked and remembered
    with pytest.raises(ShapeError, match="indexed with 1 indices but has shape"):
        f(x=td.tensor(np.ones((5, 2))), w=w)
    with pytest.raises(DTypeError, match="real number array"):
        f(x=td.tensor(np.ones(5, dtype=complex)), w=w)
    with pytest.raises(InputError, match="missing w"):
        f(x=td.tensor(np.ones(5)))
    with pytest.raises(InputError, match="unexpected v"):
        f(x=td.tensor(np.ones(5)), w=w, v=w)
    with pytest.raises(DTypeError, match="got str"):
        f(x=td.tensor(np.ones(5)), w="ones")
    with pytest.raises(ShapeError, match="would have size 0"):
        f(x=td.tensor(np.ones(2)), w=w)


def test_cache_limit_rejects_nonsense(monkeypatch):
    with pytest.raises(InputError, match=r"set_cache_limit\(0\): expected a positive int"):
        set_cache_limit(0)
    with pytest.raises(InputError, match="expected a positive int"):
        set_cache_limit(2.5)
    from tadiff.index.compile import cache

    monkeypatch.setenv("TADIFF_KERNEL_CACHE", "lots")
    with pytest.raises(InputError, match="TADIFF_KERNEL_CACHE='lots'"):
        cache._limit_from_environment()
    monkeypatch.setenv("TADIFF_KERNEL_CACHE", "0")
    with pytest.raises(InputError, match="at least 1 kernel"):
        cache._limit_from_environment()
    monkeypatch.setenv("TADIFF_KERNEL_CACHE", "32")
    assert cache._limit_from_environment() == 32


def test_numba_jit_time_is_counted_and_the_machine_code_cached_on_disk(tmp_path):
    pytest.importorskip("numba")
    import subprocess
    import sys

    # a fresh process with an empty cache folder: its first call compiles, and numba writes
    # the machine code next to the generated source for later processes
    script = (
        "import numpy as np, tadiff as td\n"
        "from tadiff.index.compile import stats\n"
        "f = td.define('y[i] = sum[k](x[i,k] * x[i,k])').using('numba')\n"
        "f.evaluate({'x': np.ones((3, 4))})\n"
        "s = stats()\n"
        "print(s['jit_compilations'], s['jit_seconds'] > 0, s['by_backend'])\n"
    )
    env = {**__import__("os").environ, "TADIFF_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)  # it would send numba's files to a folder of its own
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["1", "True"]
    folder = tmp_path / "numba"
    sources = list(folder.glob("tadiff_kernel_*.py"))
    assert len(sources) == 1
    cached = [p for p in folder.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert cached, f"no numba cache files in {folder}: {list(folder.rglob('*'))}"


def test_float32_kernels_compute_in_float32():
    pytest.importorskip("numba")
    f = define("y[i] = sum[j](exp(-(x[i] - z[j])**2) * v[j])").using("numba")
    rng = np.random.default_rng(5)
    x, z, v = (rng.uniform(0, 1, size=n).astype(np.float32) for n in (50, 20000, 20000))
    k = kernel(f, {"x": x.shape, "z": z.shape, "v": v.shape}, np.float32, "numba")
    assert "DT = np.float32" in k.source and "float(" not in k.source
    got = k({"x": x, "z": z, "v": v})
    assert got.dtype == np.float32
    exact = (np.exp(-((x[:, None] - z[None]).astype(np.float64) ** 2)) * v).sum(1)
    # 20 000 positive terms added in float32: the rounding error of a sum of n terms is at most
    # about n * eps relative (2e4 * 6e-8 = 1.2e-3); pairwise or vectorized order does better
    np.testing.assert_allclose(got, exact, rtol=1.2e-3)


def test_auto_takes_numba_for_large_stages_and_numpy_for_convolutions():
    pytest.importorskip("numba")
    from tadiff.index.compile.lower import AUTO_NUMBA_MIN_WORK, stage_backends
    from tadiff.index.compile.schedule import plan_program

    kernel_sum = define("out[i] = sum[j](exp(-sum[q]((a[i,q]-b[j,q])**2)) * v[j])")
    big = plan_program(kernel_sum, {"a": (400, 8), "b": (400, 8), "v": (400,)}, np.float32)
    assert big.cost >= AUTO_NUMBA_MIN_WORK and stage_backends(big, "auto") == ["numba"]
    small = plan_program(kernel_sum, {"a": (4, 8), "b": (4, 8), "v": (4,)}, np.float32)
    assert stage_backends(small, "auto") == ["numpy"]
    conv = define(CONV2D)
    plan = plan_program(conv, {"x": (8, 16, 28, 28), "w": (16, 16, 3, 3)}, np.float32)
    assert plan.cost >= AUTO_NUMBA_MIN_WORK and stage_backends(plan, "auto") == ["numpy"]
    assert stage_backends(plan, "numba") == ["numba"]


def test_auto_keeps_wide_contractions_on_blas_and_depthwise_ones_on_loops():
    """A small-image convolution the window lowering does not take is still a wide matrix
    product (sides 1024, 16 and 72: BLAS); a depthwise one has a side of width 1 (loops)."""
    pytest.importorskip("numba")
    from tadiff.index.compile.lower import AUTO_NUMBA_MIN_WORK, stage_backends
    from tadiff.index.compile.schedule import plan_program

    conv = define(CONV2D)
    shapes = {"x": (64, 8, 10, 10), "w": (16, 8, 3, 3)}
    dy = {"dy": conv.output_shape(**shapes)}
    for fn in (conv, conv.grad("x"), conv.grad("w")):
        plan = plan_program(fn, {a: {**shapes, **dy}[a] for a in fn.args}, np.float32)
        assert plan.cost >= AUTO_NUMBA_MIN_WORK, fn
        assert stage_backends(plan, "auto") == ["numpy"], fn
    depthwise = define("y[b,c,t] = sum[k](x[b,c,2*t+k] * w[c,k])")
    shapes = {"x": (4, 64, 1024), "w": (64, 7)}
    dy = {"dy": depthwise.output_shape(**shapes)}
    for fn in (depthwise, depthwise.grad("x"), depthwise.grad("w")):
        plan = plan_program(fn, {a: {**shapes, **dy}[a] for a in fn.args}, np.float32)
        assert plan.cost >= AUTO_NUMBA_MIN_WORK, fn
        assert stage_backends(plan, "auto") == ["numba"], fn


def test_auto_keeps_a_strided_dilated_input_gradient_on_window_products():
    """The input gradient of a stride-2, dilation-2 convolution is a residue mask around a
    contraction, ``where(r % 2 == 0 and ..., sum[...](dy * w), 0)``: the window lowering takes
    it (a loop nest ran it 11x slower than torch)."""
    pytest.importorskip("numba")
    from tadiff.index.compile.lower import stage_backends
    from tadiff.index.compile.schedule import plan_program

    conv = define("y[b,o,i,j] = sum[c,p,q](x[b,c,2*i+2*p,2*j+2*q] * w[o,c,p,q])")
    shapes = {"x": (4, 16, 28, 28), "w": (16, 16, 3, 3)}
    dx = conv.grad("x")
    shapes["dy"] = conv.output_shape(x=shapes["x"], w=shapes["w"])
    plan = plan_program(dx, {a: shapes[a] for a in dx.args}, np.float32)
    assert "where" in str(plan.stages[-1].fn)
    assert stage_backends(plan, "auto") == ["numpy"]


def test_auto_runs_convolutions_whose_products_are_too_narrow_as_loops():
    """One input channel makes each window-unrolled product an outer or matrix-vector product,
    and eight output channels make the product-first input gradient contract over 8 only: both
    run as loops. Four or more channels on every side keep the BLAS products."""
    pytest.importorskip("numba")
    from tadiff.index.compile.lower import stage_backends
    from tadiff.index.compile.schedule import plan_program

    conv = define("y[b,o,h,v] = sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])")

    def backends(x, w):
        shapes = {"x": x, "w": w, "dy": conv.output_shape(x=x, w=w)}
        plans = [plan_program(g, {a: shapes[a] for a in g.args}, np.float32)
                 for g in (conv, conv.grad("x"), conv.grad("w"))]  # fmt: skip
        return [stage_backends(p, "auto")[-1] for p in plans]

    assert backends((32, 1, 18, 18), (8, 1, 3, 3)) == ["numba", "numba", "numba"]
    assert backends((32, 8, 18, 18), (8, 8, 3, 3))[1] == "numba"  # product first, contracts 8
    assert backends((32, 8, 18, 18), (32, 8, 3, 3)) == ["numpy", "numpy", "numpy"]
    assert backends((64, 8, 10, 10), (16, 8, 3, 3)) == ["numpy", "numpy", "numpy"]
