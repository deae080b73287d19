"""``tadiff.parallel``: the thread controls (BLAS through threadpoolctl, fewer threads while
other processes keep cores busy) and the block loops on tadiff's own helper threads.

The block loops are checked for what a caller relies on: every block runs exactly once, on
more than one thread, with one BLAS thread per product while they run and the BLAS thread count
restored afterwards (also when a worker raises); a helper that cannot start is not waited for;
nested and concurrent loops run in their calling threads; a forked child works.
The kernels built on them are checked against the interpreter in
``tests/index/test_compile_window_gemm.py`` (the "threads" variants).
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tadiff as td
from tadiff import parallel
from tadiff.errors import InputError

CORES = parallel._cores()
needs_two_cores = pytest.mark.skipif(CORES < 2, reason="one core: no second thread to share")
needs_blas_control = pytest.mark.skipif(
    not parallel._blas_controllers(), reason="threadpoolctl finds no BLAS library to control"
)


def _blas_threads() -> list[int]:
    return [c.get_num_threads() for c in parallel._blas_controllers()]


@pytest.fixture
def two_threads(monkeypatch):
    """Two threads for every loop, however little work a block does or how busy the cores."""
    monkeypatch.setattr(parallel, "_requested", 2)
    monkeypatch.setattr(parallel, "_dynamic", False)
    monkeypatch.setattr(parallel, "_MIN_BLOCK_FLOPS", 0)
    parallel.sync_threads(force=True)
    yield
    monkeypatch.undo()
    parallel.sync_threads(force=True)


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
    try:
        assert td.set_num_threads(3) == default
        assert td.get_num_threads() == parallel.get_num_threads() == 3
        assert td.set_num_threads(1) == 3
    finally:
        monkeypatch.undo()
        parallel.sync_threads(force=True)
    assert {"get_num_threads", "set_num_threads", "parallel"} <= set(td.__all__)


@needs_blas_control
def test_set_num_threads_governs_numpy_blas(monkeypatch):
    monkeypatch.setattr(parallel, "_dynamic", False)
    previous = td.set_num_threads(1)
    try:
        assert _blas_threads() and set(_blas_threads()) == {1}
        assert parallel.threads_in_use() == 1
        td.set_num_threads(2)
        assert set(_blas_threads()) == {2}
    finally:
        td.set_num_threads(previous)


def test_set_num_threads_governs_numba_kernels(monkeypatch):
    numba = pytest.importorskip("numba")
    monkeypatch.setattr(parallel, "_dynamic", False)
    previous = td.set_num_threads(1)
    try:
        assert numba.get_num_threads() == 1
        td.set_num_threads(2)
        assert numba.get_num_threads() == min(2, numba.config.NUMBA_NUM_THREADS)
    finally:
        td.set_num_threads(previous)


def test_numba_kernels_below_the_grain_run_on_one_thread(monkeypatch):
    """A Numba kernel runs on one thread unless its estimated cost reaches ``PARALLEL_FROM``;
    then on ``threads_in_use()`` (which leaves out busy cores), not on ``get_num_threads()``."""
    numba = pytest.importorskip("numba")
    from tadiff.index import define
    from tadiff.index.compile import numba_backend

    fn = define("y[i, j] = x[i, j] * 2 + 1")
    x = np.arange(12.0).reshape(3, 4)
    monkeypatch.setattr(parallel, "_dynamic", False)
    previous = td.set_num_threads(2)
    try:
        most = min(2, numba.config.NUMBA_NUM_THREADS)
        np.testing.assert_array_equal(fn.evaluate({"x": x}, backend="numba"), x * 2 + 1)
        assert numba.get_num_threads() == 1  # 12 elements: far below the grain
        monkeypatch.setattr(numba_backend, "PARALLEL_FROM", 0.0)
        np.testing.assert_array_equal(fn.evaluate({"x": x}, backend="numba"), x * 2 + 1)
        assert numba.get_num_threads() == most
        monkeypatch.setattr(parallel, "threads_in_use", lambda: 1)  # the other core is busy
        fn.evaluate({"x": x}, backend="numba")
        assert numba.get_num_threads() == 1
    finally:
        td.set_num_threads(previous)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_set_num_threads_rejects_what_is_not_a_positive_int(bad, monkeypatch):
    monkeypatch.setattr(parallel, "_requested", None)
    with pytest.raises(InputError, match="positive int"):
        td.set_num_threads(bad)
    assert parallel._requested is None
    with pytest.raises(InputError, match="must be a bool"):
        parallel.set_dynamic(1)


def test_environment_variables_set_the_defaults(monkeypatch):
    monkeypatch.setattr(parallel, "_requested", None)
    monkeypatch.setattr(parallel, "_dynamic", None)
    caches = (parallel._default_threads, parallel._default_dynamic)
    monkeypatch.setenv("TADIFF_NUM_THREADS", "3")
    monkeypatch.setenv("TADIFF_DYNAMIC_THREADS", "0")
    for cache in caches:
        cache.cache_clear()
    try:
        assert td.get_num_threads() == 3 and parallel.get_dynamic() is False
        assert parallel.threads_in_use() == 3
        monkeypatch.setenv("TADIFF_NUM_THREADS", "zero")
        monkeypatch.setenv("TADIFF_DYNAMIC_THREADS", "2")
        for cache in caches:
            cache.cache_clear()
        with pytest.raises(InputError, match=r"\$TADIFF_NUM_THREADS.*'zero'"):
            td.get_num_threads()
        with pytest.raises(InputError, match=r"\$TADIFF_DYNAMIC_THREADS must be 0 or 1.*'2'"):
            parallel.get_dynamic()
    finally:
        monkeypatch.undo()
        for cache in caches:
            cache.cache_clear()


def test_blas_info_is_consistent():
    info = parallel.blas_info()
    assert set(info) == {"libraries", "num_threads", "threads_in_use", "dynamic"}
    for lib in info["libraries"]:
        assert lib["library"] and lib["path"] and lib["threads"] >= 1
    assert info["num_threads"] == td.get_num_threads()
    assert 1 <= info["threads_in_use"] <= info["num_threads"]


def _fake_load(monkeypatch, others_busy: float, cores: int = 4):
    """Make the load sampler see ``cores`` cores of which other processes use ``others_busy``
    (in cores), with this process using one more, over each 1 s interval."""
    clock = {"t": 0.0, "busy": 0, "total": 0, "own": 0}

    def cpu_times(cpus):
        clock["busy"] += int(100 * (others_busy + 1))
        clock["total"] += 100 * cores
        return clock["busy"], clock["total"]

    def own_ticks():
        clock["own"] += 100
        return clock["own"]

    def monotonic():
        clock["t"] += 1.0
        return clock["t"]

    load = parallel._Load()
    load.cpus, load.idle = frozenset(range(cores)), cores
    monkeypatch.setattr(parallel, "_load", load)
    monkeypatch.setattr(parallel, "_read_cpu_times", cpu_times)
    monkeypatch.setattr(parallel, "_read_own_ticks", own_ticks)
    monkeypatch.setattr(parallel.time, "monotonic", monotonic)
    monkeypatch.setattr(parallel, "_requested", cores)
    monkeypatch.setattr(parallel, "_dynamic", True)


@pytest.mark.parametrize(
    ("others_busy", "expected"), [(0.0, 4), (0.2, 4), (0.3, 3), (1.0, 3), (2.5, 1), (4.0, 1)]
)
def test_cores_other_processes_keep_busy_are_left_out(monkeypatch, others_busy, expected):
    _fake_load(monkeypatch, others_busy)
    assert parallel.threads_in_use() == 4  # no interval measured yet: every core
    assert parallel.threads_in_use() == expected
    parallel.set_dynamic(False)
    assert parallel.threads_in_use() == 4
    monkeypatch.undo()
    parallel.sync_threads(force=True)


@needs_two_cores
@pytest.mark.skipif(sys.platform != "linux", reason="the load is read from /proc/stat")
def test_a_busy_process_takes_a_thread_away(monkeypatch):
    # a real CPU-bound process: after a sampling interval with it running, one core less
    monkeypatch.setattr(parallel, "_requested", CORES)
    monkeypatch.setattr(parallel, "_dynamic", True)
    monkeypatch.setattr(parallel, "_load", parallel._Load())
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        parallel.threads_in_use()  # the first sample
        time.sleep(3 * parallel._SAMPLE_SECONDS)
        in_use = parallel.threads_in_use()
    finally:
        hog.kill()
        hog.wait()
        monkeypatch.undo()
        parallel.sync_threads(force=True)
    assert 1 <= in_use <= CORES - 1


@pytest.mark.parametrize("count", [1, 2, 7, 40])
def test_every_block_runs_exactly_once(count, two_threads):
    log: list = []
    workers = parallel.run_blocks(count, _recorder(log))
    assert sorted(i for i, _ in log) == list(range(count))
    assert 1 <= len(workers) <= 2


@needs_two_cores
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


@needs_blas_control
def test_one_blas_thread_inside_the_loop_and_the_count_restored_after(two_threads):
    before = _blas_threads()
    assert set(before) == {2}
    seen = []

    def make_worker():
        return lambda i: seen.append(_blas_threads())

    parallel.run_blocks(6, make_worker)
    assert len(seen) == 6 and all(set(s) == {1} for s in seen)
    assert _blas_threads() == before


def test_a_worker_error_reaches_the_caller_and_everything_is_restored(two_threads):
    before = _blas_threads()

    def make_worker():
        def work(i: int) -> None:
            time.sleep(0.001)
            if i == 3:
                raise ValueError("block 3 is bad")

        return work

    with pytest.raises(ValueError, match="block 3 is bad"):
        parallel.run_blocks(12, make_worker)
    assert _blas_threads() == before
    log: list = []
    parallel.run_blocks(5, _recorder(log))  # the machinery still works afterwards
    assert sorted(i for i, _ in log) == list(range(5))


def test_a_helper_that_cannot_start_is_not_waited_for(two_threads):
    # the only helper thread is kept busy: the caller takes every block and returns
    parallel.run_blocks(2, _recorder([]))  # makes sure the helper thread exists
    release, busy = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(30)

    parallel._helpers.submit(hold, 1)
    assert busy.wait(10)
    log: list = []
    try:
        parallel.run_blocks(6, _recorder(log))
    finally:
        release.set()
    assert sorted(i for i, _ in log) == list(range(6))
    assert {t for _, t in log} == {threading.get_ident()}


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
    before = _blas_threads()
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
    assert _blas_threads() == before


def _child(queue) -> None:  # pragma: no cover - runs in the forked child
    import numpy as np

    from tadiff import parallel
    from tadiff.index import define
    from tadiff.index.compile.vectorized import lower_numpy

    parallel._MIN_BLOCK_FLOPS = 0
    parallel._requested = 2
    parallel._dynamic = False
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
            mp.setattr(parallel, "_dynamic", False)
            mp.setattr(parallel, "_MIN_BLOCK_FLOPS", 0)
            results[mode] = [
                lower_numpy(fn, {n: shapes[n] for n in fn.args}, np.float64)(
                    {n: arrays[n] for n in fn.args}
                )
                for fn in (f, f.grad("x"), f.grad("w"))
            ]
    for a, b in zip(results["serial"], results["threads"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@needs_blas_control
def test_small_products_run_on_one_blas_thread_and_large_ones_on_all(two_threads, monkeypatch):
    with parallel.blas_threads_for(2 * 64**3):  # 0.5 MFLOP per product
        assert set(_blas_threads()) == {1}
    assert set(_blas_threads()) == {2}
    with parallel.blas_threads_for(2 * 512**3):
        assert set(_blas_threads()) == {2}
    monkeypatch.setattr(parallel, "_MIN_BLOCK_FLOPS", 48e6)
    here = threading.get_ident()
    log: list = []  # a serial block loop of small blocks: one BLAS thread inside
    parallel.run_blocks(
        3, lambda: lambda i: log.append((threading.get_ident(), _blas_threads())), flops=1e6
    )
    assert log and all(t == here and set(n) == {1} for t, n in log)
    log.clear()  # one block of large products, in the calling thread: BLAS's threads
    parallel.run_blocks(1, lambda: lambda i: log.append((threading.get_ident(), _blas_threads())),
                        flops=1e12)  # fmt: skip
    assert log == [(here, [2])] and set(_blas_threads()) == {2}


def test_numba_kernels_of_a_few_microseconds_are_compiled_without_parallel():
    """Below ``SERIAL_BUILD_BELOW`` a kernel is built serial (faster to compile, no thread-pool
    entry per call); its source keeps the schedule's ``numba.prange``, which a serial build
    reads as ``range``. Larger ones are built with ``parallel=True``."""
    pytest.importorskip("numba")
    from tadiff.index import define
    from tadiff.index.compile import numba_backend
    from tadiff.index.compile.schedule import plan_program

    f = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    small = {"x": (4, 3, 20), "w": (5, 3, 3)}
    large = {"x": (64, 64, 64), "w": (64, 64, 3)}
    for shapes, built_parallel in ((small, False), (large, True)):
        stage = plan_program(f, shapes).stages[-1]
        assert (stage.nest.cost >= numba_backend.SERIAL_BUILD_BELOW) is built_parallel
        src, _ = numba_backend.stage_source(stage.fn, stage.nest, np.float64)
        assert "numba.prange(" in src and f"parallel={built_parallel}," in src
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=small["x"]), rng.normal(size=small["w"])
    y = f.evaluate({"x": x, "w": w}, backend="numba")  # the serial build runs the prange loop
    windows = np.stack([x[:, :, k : k + 17 : 2] for k in range(3)], axis=2)  # x[b, c, 2t + k]
    # sums of 9 products in another order: float64 rounding, far below a wrong term's O(1)
    np.testing.assert_allclose(y, np.einsum("bckt,ock->bot", windows, w), rtol=1e-12, atol=1e-12)
