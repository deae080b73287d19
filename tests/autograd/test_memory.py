"""No leaks: saved arrays are released by backward, graphs die with their outputs, a training-style
loop keeps memory flat."""

import gc
import tracemalloc
import weakref

import numpy as np

import tadiff as td


class _Tracked(np.ndarray):
    """An ndarray subclass so a weakref can watch the buffer an op saves."""


def _tracked(values):
    return np.asarray(values, dtype=np.float64).view(_Tracked)


def test_backward_frees_saved_buffers_even_while_output_lives():
    x = td.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    h = td.Tensor(_tracked([3.0, 4.0]) * 1)  # an intermediate the graph saves...
    h = h * 1
    ref_data = weakref.ref(h.data)
    y = (x * h).sum()  # MulBackward0 saves x and h
    del h
    assert ref_data() is not None  # kept alive only by the saved tensors of y's graph
    y.backward()
    gc.collect()
    assert ref_data() is None  # released by backward although y is still alive
    assert y.grad_fn is not None


def test_graph_dies_with_its_output_without_gc():
    x = td.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    y = (x.exp() * x).tanh().sum()
    node_ref = weakref.ref(y.grad_fn)
    result_ref = weakref.ref(y.grad_fn.next_functions[0][0])
    gc.disable()
    try:
        y.backward()
        del y
        assert node_ref() is None and result_ref() is None  # no reference cycles: refcounting
    finally:
        gc.enable()


def test_saved_results_do_not_form_cycles():
    x = td.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    gc.disable()
    try:
        y = x.exp()  # saves its own result
        data_ref = weakref.ref(y)
        node_ref = weakref.ref(y.grad_fn)
        del y
        assert data_ref() is None and node_ref() is None
    finally:
        gc.enable()


def test_leaf_and_its_accumulator_form_no_cycle():
    w = td.tensor([1.0], requires_grad=True)
    y = w * 2
    acc = y.grad_fn.next_functions[0][0]
    assert acc.variable is w
    assert (w * 3).grad_fn.next_functions[0][0] is acc  # one accumulator per leaf, reused
    node_ref, acc_ref, w_ref = weakref.ref(y.grad_fn), weakref.ref(acc), weakref.ref(w)
    gc.disable()
    try:
        del y, acc
        assert node_ref() is None  # the accumulator does not keep the graph alive
        del w
        assert w_ref() is None and acc_ref() is None  # nor the leaf: it refers back weakly
    finally:
        gc.enable()


def test_training_loop_memory_is_flat():
    td.manual_seed(0)
    w = td.randn(8, 4, requires_grad=True)
    b = td.zeros(4, requires_grad=True)
    x = td.randn(16, 8)
    target = td.randn(16, 4)

    def step():
        loss = ((x @ w + b).tanh() * target).sum()
        loss.backward()
        with td.no_grad():
            w.sub_(0.01 * w.grad)
            b.sub_(0.01 * b.grad)
        w.grad = None
        b.grad = None

    for _ in range(1000):  # warm up caches
        step()
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        for _ in range(10_000):
            step()
        gc.collect()
        now, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert now - base < 64 * 1024, f"memory grew by {now - base} bytes over 10 000 iterations"


def test_iterating_a_tensor_again_and_again_keeps_its_list_of_views_bounded():
    # unbind registers its views in bulk; dead ones are dropped whenever the list crosses a
    # power of two, as for views made one at a time
    x = td.ones(14, requires_grad=True)
    for _ in range(3000):
        list(x)
    assert len(x._meta.views) < 128


def _tracked_survivors(op, n=50):
    """Objects the cyclic garbage collector tracks that ``n`` results of ``op()`` keep alive."""
    op()
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    kept = [op() for _ in range(n)]
    gc.collect()  # a collection untracks the tuples that hold only atoms (shapes, ints)
    new = [o for o in gc.get_objects() if id(o) not in before and o is not kept]
    return len(new) / n


def test_a_recorded_op_leaves_few_objects_for_the_garbage_collector():
    """A program that records tens of thousands of small ops (a loop over observations) spends
    about as long in Python's cyclic collector as in the ops: every object a node keeps alive
    is visited several times while the graph grows. A binary op keeps its node, its output,
    the tuple of producer nodes and the saved inputs; the producers' output numbers are a
    shared tuple, not one pair per edge."""
    a = td.ones(3, dtype=td.float64, requires_grad=True) * 1
    b = td.ones(3, dtype=td.float64, requires_grad=True) * 1
    assert _tracked_survivors(lambda: a * b) <= 4.5
    assert _tracked_survivors(lambda: a + b) <= 4.5
