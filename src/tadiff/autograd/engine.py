"""The reverse pass: dependency-counted, iterative, over the graph of backward nodes.

1. Walk the graph from the roots (an explicit stack, never recursion, so a 100 000-op chain is
   fine) and count, for every node, how many edges lead into it.
2. Seed the roots' gradients; a node is *ready* when all of its incoming edges have delivered, so
   its gradient buffer holds the sum of every contribution before it runs.
3. Pop a ready node, run its hooks and its VJPs, release its saved tensors (unless
   ``retain_graph``), add each result into the buffer of the node it flows to, and decrement that
   node's count.

Gradients travel as plain ndarrays in an ordinary pass (no Tensor or node is created for them),
and as Tensors — recorded like any forward computation — when ``create_graph`` is set.

``inputs``/``autograd.grad`` restrict the pass to the nodes that lead to the requested tensors and
capture the gradient arriving at each.

Example:
    >>> import tadiff as td
    >>> x = td.tensor(3.0, requires_grad=True)
    >>> (g,) = td.autograd.grad(x * x * x, x, create_graph=True)
    >>> td.autograd.grad(g, x)[0].item()   # d²(x³)/dx² = 6x
    18.0
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from tadiff.autograd import grad_mode
from tadiff.autograd.graph import (
    ANOMALY,
    AccumulateGrad,
    Node,
    accumulate_into,
    anomaly_trace,
    edge,
    run_post_hooks,
    run_pre_hooks,
)
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import AutogradError, ShapeError
from tadiff.parallel import sync_threads

_state = grad_mode._state


def _as_tuple(values: Any) -> tuple[Any, ...]:
    if values is None:
        return ()
    if isinstance(values, (Tensor, np.ndarray)):
        return (values,)
    return tuple(values)


def _root_grads(
    outputs: tuple[Tensor, ...], grads: tuple[Any, ...], create_graph: bool
) -> list[Any]:
    """The seed gradients: given ones checked against the outputs, implicit ones for scalars."""
    if grads and len(grads) != len(outputs):
        raise AutogradError(
            f"grad_outputs has {len(grads)} entries but there are {len(outputs)} outputs"
        )
    seeds = []
    for i, out in enumerate(outputs):
        g = grads[i] if grads else None
        if g is None:
            if out.data.size != 1:
                raise AutogradError("grad can be implicitly created only for scalar outputs")
            g = np.ones(out.data.shape, out.data.dtype)
            seeds.append(_make(g) if create_graph else g)
            continue
        if not isinstance(g, Tensor):
            g = _make(np.asarray(g))
        if g.data.shape != out.data.shape:
            raise ShapeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.data.shape} and "
                f"output[{i}] has a shape of {out.data.shape}."
            )
        if g.data.dtype != out.data.dtype:
            g = g.to(out.data.dtype) if create_graph else _make(g.data.astype(out.data.dtype))
        seeds.append(g if create_graph else g.data)
    return seeds


def _root_edges(outputs: tuple[Tensor, ...]) -> list[tuple[Node, int]]:
    edges = []
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise AutogradError(f"element {i} of tensors is a {type(out).__name__}, not a Tensor")
        e = edge(out)
        if e[0] is None:
            raise AutogradError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        edges.append(e)
    return edges


def _count_dependencies(
    roots: list[tuple[Node, int]], leaves: set[Node] | None = None
) -> dict[Node, int]:
    """Incoming edges per node reachable from ``roots``; the leaves' ``AccumulateGrad`` nodes
    met on the way are added to ``leaves`` when it is given."""
    deps: dict[Node, int] = {}
    stack = []
    for node, _ in roots:
        if node not in deps:
            deps[node] = 0
            stack.append(node)
    while stack:
        node = stack.pop()
        producers = node._next
        if not producers and leaves is not None and type(node) is AccumulateGrad:
            leaves.add(node)
        for nxt in producers:
            if nxt is not None:
                count = deps.get(nxt)
                if count is None:
                    deps[nxt] = 1
                    stack.append(nxt)
                else:
                    deps[nxt] = count + 1
    return deps


def _needed_nodes(
    roots: list[tuple[Node, int]], deps: dict[Node, int], targets: set[Node]
) -> set[Node]:
    """Nodes from which some target is reachable (the only ones worth running)."""
    remaining = dict(deps)
    order = []
    ready = [n for n in {n for n, _ in roots} if remaining[n] == 0]
    while ready:  # Kahn's order: parents before children
        node = ready.pop()
        order.append(node)
        for nxt in node._next:
            if nxt is not None:
                remaining[nxt] -= 1
                if remaining[nxt] == 0:
                    ready.append(nxt)
    needed = set()
    for node in reversed(order):
        if node in targets or any(n in needed for n in node._next):
            needed.add(node)
    return needed


def _check_nan(node: Node, outs: Sequence[Any]) -> None:
    for i, g in enumerate(outs):
        if g is None:
            continue
        data = g.data if type(g) is Tensor else np.asarray(g)
        if data.dtype.kind in "fc" and np.isnan(data).any():
            raise AutogradError(
                f"Function '{node.name()}' returned nan values in its {i}th output.\n"
                f"The forward op was created at:\n{anomaly_trace(node)}"
            )


def _execute(
    roots: list[tuple[Node, int]],
    seeds: list[Any],
    keep_graph: bool,
    create_graph: bool,
    targets: list[tuple[Node, int]] | None = None,
    run_targets: bool = True,
) -> dict[tuple[Node, int], Any]:
    """Run the reverse pass; return the gradients that reached ``targets`` (edge -> grad).

    ``run_targets=False`` (``autograd.grad``) captures at target nodes without running an
    ``AccumulateGrad``; with ``targets=None`` every reachable node runs.
    """
    sync_threads()  # use the cores other processes leave idle (tadiff.parallel)
    leaves: set[Node] | None = set() if targets is not None else None
    deps = _count_dependencies(roots, leaves)
    needed = None
    target_nodes: dict[Node, list[int]] = {}
    captured: dict[tuple[Node, int], Any] = {}
    every_leaf = False
    if targets is not None:
        for node, nr in targets:
            target_nodes.setdefault(node, []).append(nr)
        # Targets that are exactly the leaves of the graph (grad(loss, params), the usual
        # case): every node leads to one of them, so nothing is pruned and the plain pass runs,
        # capturing at the leaves instead of accumulating.
        every_leaf = leaves == target_nodes.keys() and all(
            type(n) is AccumulateGrad for n in target_nodes
        )
        if not every_leaf:
            needed = _needed_nodes(roots, deps, set(target_nodes))

    buffers: dict[Node, Any] = {}
    for (node, nr), g in zip(roots, seeds, strict=True):
        _add_grad(buffers, node, nr, g)
    ready = [n for n in dict.fromkeys(n for n, _ in roots) if deps[n] == 0]
    previous_mode = _state.enabled
    _state.enabled = create_graph
    anomaly = ANOMALY[0]
    try:
        # Gradients at edge points are inf or NaN where torch's are (log at 0, a NaN upstream);
        # NumPy's floating-point warnings about them would only be noise. One errstate for the
        # whole pass: one per formula would cost as much as a small formula itself.
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            if targets is None or (every_leaf and run_targets):
                _run_all(ready, buffers, deps, keep_graph, create_graph, anomaly)
            elif every_leaf:
                _run_all(ready, buffers, deps, keep_graph, create_graph, anomaly, captured)
            else:
                _run_targeted(
                    ready, buffers, deps, keep_graph, create_graph, anomaly,
                    target_nodes, needed, captured, run_targets,
                )  # fmt: skip
    finally:
        _state.enabled = previous_mode
    return captured


def _run_targeted(
    ready: list[Node],
    buffers: dict[Node, Any],
    deps: dict[Node, int],
    keep_graph: bool,
    create_graph: bool,
    anomaly: bool,
    target_nodes: dict[Node, list[int]],
    needed: set[Node],
    captured: dict[tuple[Node, int], Any],
    run_targets: bool,
) -> None:
    """The pass of ``grad()``/``backward(inputs=)``: only nodes leading to a target run, and
    the gradient arriving at each target is captured."""
    while ready:
        node = ready.pop()
        grads = buffers.pop(node, None)
        outs = None
        if grads is not None:
            if node._extra is not None:
                grads = run_pre_hooks(node, grads, create_graph)
            if node in target_nodes:
                for nr in target_nodes[node]:
                    captured[(node, nr)] = grads if node._n_outputs == 1 else grads[nr]
                run = (run_targets and type(node) is AccumulateGrad) or any(
                    n in needed for n in node._next
                )
            else:
                run = node in needed
            if run:
                outs = node._apply(grads, create_graph)
                if anomaly:
                    _check_nan(node, outs)
                if node._extra is not None and node._extra.hooks:
                    outs = run_post_hooks(node, outs, grads, create_graph)
                if not keep_graph:
                    node._release()
        producers = node._next
        if outs is None:
            outs = _nones(producers)
        for nxt, nr, g in zip(producers, node._nrs, outs, strict=True):
            if nxt is None or nxt not in needed:
                continue
            if g is not None:
                _add_grad(buffers, nxt, nr, g)
            count = deps[nxt] - 1
            deps[nxt] = count
            if count == 0:
                ready.append(nxt)


def _run_all(
    ready: list[Node],
    buffers: dict[Node, Any],
    deps: dict[Node, int],
    keep_graph: bool,
    create_graph: bool,
    anomaly: bool,
    captured: dict[tuple[Node, int], Any] | None = None,
) -> None:
    """The plain pass (every reachable node runs): the engine's hot loop, kept minimal.

    With ``captured`` (``grad()`` whose inputs are all the graph's leaves) the gradient
    reaching each leaf is stored there instead of being accumulated into ``.grad``.
    """
    pop, push = ready.pop, ready.append
    take, get = buffers.pop, buffers.get
    while ready:
        node = pop()
        grads = take(node, None)
        producers = node._next
        if grads is None:
            outs = _nones(producers)
        else:
            extra = node._extra
            if captured is not None and type(node) is AccumulateGrad:
                if extra is not None:
                    grads = run_pre_hooks(node, grads, create_graph)
                captured[(node, 0)] = grads
                continue
            if type(node) is AccumulateGrad and extra is None and not create_graph:
                # the leaf may keep the array itself when nothing else refers to it (only this
                # frame's ``grads``): torch's AccumulateGrad steals such a gradient the same way
                owned = type(grads) is np.ndarray and _refcount(grads) <= _ONE_LOCAL
                leaf = node._variable()
                if leaf is not None and leaf._rg:  # (a leaf may stop requiring grad: torch's too)
                    accumulate_into(leaf, grads, False, owned)
                continue
            if extra is not None:
                grads = run_pre_hooks(node, grads, create_graph)
            outs = node._apply(grads, create_graph)
            if anomaly:
                _check_nan(node, outs)
            if extra is not None and extra.hooks:
                outs = run_post_hooks(node, outs, grads, create_graph)
            if not keep_graph and (node._saved or node._frees_args):
                node._release()
        for nxt, nr, g in zip(producers, node._nrs, outs):  # noqa: B905 - equal lengths
            if nxt is None:
                continue
            if g is not None:
                if nxt._n_outputs == 1:
                    old = get(nxt)
                    buffers[nxt] = g if old is None else old + g
                else:
                    _add_grad(buffers, nxt, nr, g)
            count = deps[nxt] - 1
            if count:
                deps[nxt] = count
            else:
                push(nxt)
        outs = g = None  # drop this frame's references, so a leaf can tell its gradient is unshared


def _unshared_count() -> int:
    """What ``sys.getrefcount`` reports for an array held by one local variable only.

    Measured rather than assumed (interpreters differ in what the argument itself adds); without
    ``sys.getrefcount`` (not CPython) nothing counts as unshared and leaves always copy.
    """
    if not hasattr(sys, "getrefcount"):
        return -1
    probe = np.empty(1)
    return sys.getrefcount(probe)


_refcount = getattr(sys, "getrefcount", lambda obj: 1 << 30)
_ONE_LOCAL = _unshared_count()


def _nones(producers: tuple[Any, ...]) -> list[None]:
    return [None] * len(producers)


def _add_grad(buffers: dict[Node, Any], node: Node, nr: int, g: Any) -> None:
    if node._n_outputs == 1:
        old = buffers.get(node)
        buffers[node] = g if old is None else old + g
        return
    slots = buffers.get(node)
    if slots is None:
        slots = buffers[node] = [None] * node._n_outputs
    slots[nr] = g if slots[nr] is None else slots[nr] + g


def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of graph leaves.

    Args:
        tensors: a Tensor or a sequence of Tensors to differentiate.
        grad_tensors: the vectors of the vector-Jacobian products, one per tensor (``None``
            allowed for single-element tensors).
        retain_graph: keep saved tensors for another pass; defaults to ``create_graph``.
        create_graph: record the pass so the gradients can be differentiated again.
        inputs: accumulate only into these tensors (leaves or not) instead of every leaf.

    Example:
        >>> import tadiff as td
        >>> x = td.tensor([1.0, 2.0], requires_grad=True)
        >>> backward((x * x).sum())
        >>> x.grad
        tensor([2., 4.])
    """
    outputs = _as_tuple(tensors)
    seeds = _root_grads(outputs, _as_tuple(grad_tensors), create_graph)
    roots = _root_edges(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is None:
        _execute(roots, seeds, retain_graph, create_graph)
        return
    chosen = _as_tuple(inputs)
    if not chosen:
        raise AutogradError("'inputs' argument to backward() cannot be empty.")
    edges = [_input_edge(t, i) for i, t in enumerate(chosen)]
    captured = _execute(roots, seeds, retain_graph, create_graph, edges, run_targets=True)
    for t, e in zip(chosen, edges, strict=True):
        if t.grad_fn is not None and e in captured:
            accumulate_into(t, captured[e], create_graph)


def _input_edge(t: Any, i: int) -> tuple[Node, int]:
    if not isinstance(t, Tensor):
        raise AutogradError(f"input {i} is a {type(t).__name__}, not a Tensor")
    if not t._rg:
        raise AutogradError(f"One of the differentiated Tensors (input {i}) does not require grad")
    return edge(t)


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Return d(outputs)/d(inputs) · grad_outputs without touching any ``.grad``.

    Args:
        outputs: Tensor or sequence of Tensors.
        inputs: Tensor or sequence of Tensors (leaves or intermediate) that require grad.
        grad_outputs: one vector per output (may be omitted for single-element outputs).
        retain_graph: keep saved tensors; defaults to ``create_graph``.
        create_graph: record the computation so the result can be differentiated again.
        allow_unused: return ``None`` for an input the outputs do not depend on instead of
            raising.
        materialize_grads: return zeros instead of ``None`` for unused inputs.

    Returns:
        A tuple with one gradient per input, each shaped and typed like its input.

    Example:
        >>> import tadiff as td
        >>> x = td.tensor(2.0, requires_grad=True)
        >>> grad(x ** 3, x)[0].item()
        12.0
    """
    outs = _as_tuple(outputs)
    ins = _as_tuple(inputs)
    if not ins:
        raise AutogradError("grad requires at least one input")
    seeds = _root_grads(outs, _as_tuple(grad_outputs), create_graph)
    roots = _root_edges(outs)
    if retain_graph is None:
        retain_graph = create_graph
    edges = [_input_edge(t, i) for i, t in enumerate(ins)]
    captured = _execute(roots, seeds, retain_graph, create_graph, edges, run_targets=False)
    result: list[Tensor | None] = []
    for i, (t, e) in enumerate(zip(ins, edges, strict=True)):
        g = captured.get(e)
        if g is None:
            if materialize_grads:
                result.append(_make(np.zeros_like(t.data)))
                continue
            if not allow_unused:
                raise AutogradError(
                    f"One of the differentiated Tensors (input {i}, shape {t.shape}) appears to "
                    "not have been used in the graph. Set allow_unused=True if this is the "
                    "desired behavior."
                )
            result.append(None)
            continue
        if type(g) is Tensor:
            if g.data.dtype != t.data.dtype:
                g = g.to(t.data.dtype)
            result.append(g)
        else:
            result.append(_make(np.array(g, dtype=t.data.dtype, copy=True)))
    return tuple(result)


__all__ = ["AccumulateGrad", "backward", "grad"]
