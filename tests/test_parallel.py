"""``tadiff.parallel``: the thread controls and the block loops that run on OpenBLAS's threads.

The block loops are checked for what a caller relies on: every block runs exactly once, on
more than one thread where NumPy's OpenBLAS has threads of its own, with one BLAS thread per
product while they run and the BLAS thread count restored afterwards (also when a worker
raises); nested and concurrent loops run in their calling threads; a forked child works.
The kernels built on them are checked against the interpreter in
``tests/index/test_compile_window_gemm.py`` (the "threads" variants).
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time

import numpy as np
import pytest

import tadiff as td
from tadiff import parallel
from tadiff.errors import InputError

INFO = parallel.blas_info()
PARALLEL = bool(INFO["parallel"]) and (INFO["blas_threads"] or 0) >= 2
needs_threads = pytest.mark.skipif(
    not PARALLEL, reason="NumPy's BLAS is not OpenBLAS with threads of its own"
)


@pytest.fixture
def two_threads(monkeypatch):
    """Two threads for every loop, however little work a block does."""
    monkeypatch.setattr(parallel, "_requested", 2)
    monkeypatch.setattr(parallel, "_MIN_BLOCK_FLOPS", 0)


def _recorder(log: list, sleep: float = 0.0):
    """make_worker for run_blocks: each block appends (block, thread) to ``log``."""

    def make_worker():
        def work(i: int) -> None:
            if sleep:
                time.sleep(sleep)  # releases the GIL: the other thread gets blocks too
            log.append((i, threading.get_ident()))

        return work

    return make_worker


def test_set_num_threads_returns_the_previous_value_and_is_exported(monkeypatch):
    monkeypatch.setattr(parallel, "_requested", None)
    default = td.get_num_threads()
    assert default >= 1
    assert td.set_num_threads(3) == default
    assert td.get_num_threads() == parallel.get_num_threads() == 3
    assert td.set_num_threads(1) == 3
    assert {"get_num_threads", "set_num_threads", "parallel"} <= set(td.__all__)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_set_num_threads_rejects_what_is_not_a_positive_int(bad, monkeypatch):
    monkeypatch.setattr(parallel, "_requested", None)
    with pytest.raises(InputError, match="positive int"):
        td.set_num_threads(bad)
    assert parallel._requested is None


def test_environment_variable_sets_the_default(monkeypatch):
    monkeypatch.setattr(parallel, "_requested", None)
    monkeypatch.setenv("TADIFF_NUM_THREADS", "3")
    parallel._default_threads.cache_clear()
    try:
        assert td.get_num_threads() == 3
        monkeypatch.setenv("TADIFF_NUM_THREADS", "zero")
        parallel._default_threads.cache_clear()
        with pytest.raises(InputError, match=r"\$TADIFF_NUM_THREADS.*'zero'"):
            td.get_num_threads()
    finally:
        monkeypatch.delenv("TADIFF_NUM_THREADS")
        parallel._default_threads.cache_clear()


def test_blas_info_is_consistent():
    info = parallel.blas_info()
    assert set(info) == {"library", "blas_threads", "parallel", "num_threads"}
    if info["parallel"]:
        assert info["library"] and info["blas_threads"] >= 1
    else:
        assert parallel.threads_for(100) == 1
    assert info["num_threads"] == td.get_num_threads()


@pytest.mark.parametrize("count", [1, 2, 7, 40])
def test_every_block_runs_exactly_once(count, two_threads):
    log: list = []
    workers = parallel.run_blocks(count, _recorder(log))
    assert sorted(i for i, _ in log) == list(range(count))
    assert 1 <= len(workers) <= 2


@needs_threads
def test_blocks_are_shared_between_two_threads(two_threads):
    log: list = []
    parallel.run_blocks(20, _recorder(log, sleep=0.002))
    assert sorted(i for i, _ in log) == list(range(20))
    assert len({t for _, t in log}) == 2


def test_small_blocks_and_one_thread_stay_in_the_calling_thread(monkeypatch):
    here = threading.get_ident()
    log: list = []
    monkeypatch.setattr(parallel, "_requested", 2)
    parallel.run_blocks(10, _recorder(log, sleep=0.001), flops=1.0)  # below the threshold
    monkeypatch.setattr(parallel, "_requested", 1)
    parallel.run_blocks(10, _recorder(log, sleep=0.001), flops=1e12)
    assert {t for _, t in log} == {here}
    assert parallel.threads_for(10, 1.0) == 1


@needs_threads
def test_one_blas_thread_inside_the_loop_and_the_count_restored_after(two_threads):
    blas = parallel._blas()
    before = blas.get_threads()
    seen = []

    def make_worker():
        return lambda i: seen.append(blas.get_threads())

    parallel.run_blocks(6, make_worker)
    assert seen and set(seen) == {1}
    assert blas.get_threads() == before


def test_a_worker_error_reaches_the_caller_and_everything_is_restored(two_threads):
    blas = parallel._blas()
    before = blas.get_threads() if blas is not None else None

    def make_worker():
        def work(i: int) -> None:
            time.sleep(0.001)
            if i == 3:
                raise ValueError("block 3 is bad")

        return work

    with pytest.raises(ValueError, match="block 3 is bad"):
        parallel.run_blocks(12, make_worker)
    if blas is not None:
        assert blas.get_threads() == before
    log: list = []
    parallel.run_blocks(5, _recorder(log))  # the machinery still works afterwards
    assert sorted(i for i, _ in log) == list(range(5))


def test_a_loop_inside_a_worker_runs_in_that_thread(two_threads):
    inner: list = []

    def make_worker():
        def work(i: int) -> None:
            here = threading.get_ident()
            log: list = []
            parallel.run_blocks(4, _recorder(log))
            inner.append((i, {t for _, t in log} == {here}, sorted(b for b, _ in log)))

        return work

    parallel.run_blocks(4, make_worker)
    assert sorted(i for i, _, _ in inner) == [0, 1, 2, 3]
    assert all(same and blocks == [0, 1, 2, 3] for _, same, blocks in inner)


def test_concurrent_loops_from_two_python_threads(two_threads):
    blas = parallel._blas()
    before = blas.get_threads() if blas is not None else None
    logs: list[list] = [[], []]
    errors: list = []

    def run(k: int) -> None:
        try:
            for _ in range(5):
                parallel.run_blocks(8, _recorder(logs[k], sleep=0.0005))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    for log in logs:
        assert sorted(i for i, _ in log) == sorted(list(range(8)) * 5)
    if blas is not None:
        assert blas.get_threads() == before


def _child(queue) -> None:  # pragma: no cover - runs in the forked child
    import numpy as np

    from tadiff import parallel
    from tadiff.index import define
    from tadiff.index.compile.vectorized import lower_numpy

    parallel._MIN_BLOCK_FLOPS = 0
    parallel._requested = 2
    f = define("y[b,o,h,v] = sum[c,i,j](x[b,c,2*h+i,2*v+j] * w[o,c,i,j])")
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(6, 3, 11, 9)), rng.normal(size=(4, 3, 3, 3))
    k = lower_numpy(f, {"x": x.shape, "w": w.shape}, np.float64)
    queue.put(float(np.abs(k({"x": x, "w": w}) - f(x=x, w=w)).max()))


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_a_forked_child_runs_threaded_kernels(two_threads):
    log: list = []
    parallel.run_blocks(8, _recorder(log))  # the parent has used the loops before the fork
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    assert queue.get(timeout=5) < 1e-12


def test_threaded_and_single_threaded_kernels_agree(monkeypatch):
    # the same conv2d forward and gradients, serial then on two threads, within float rounding
    from tadiff.index import define
    from tadiff.index.compile.vectorized import lower_numpy

    f = define("y[b,o,h,v] = sum[c,i,j](x[b,c,2*h+i,2*v+j] * w[o,c,i,j])")
    rng = np.random.default_rng(1)
    shapes = {"x": (8, 4, 12, 12), "w": (5, 4, 3, 3)}
    shapes["dy"] = f.output_shape(**shapes)
    arrays = {n: rng.normal(size=s) for n, s in shapes.items()}
    results = {}
    for mode in ("serial", "threads"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(parallel, "_requested", 1 if mode == "serial" else 2)
            mp.setattr(parallel, "_MIN_BLOCK_FLOPS", 0)
            results[mode] = [
                lower_numpy(fn, {n: shapes[n] for n in fn.args}, np.float64)(
                    {n: arrays[n] for n in fn.args}
                )
                for fn in (f, f.grad("x"), f.grad("w"))
            ]
    for a, b in zip(results["serial"], results["threads"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
