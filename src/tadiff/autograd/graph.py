"""Backward nodes and how forward operations record them.

The graph is the one PyTorch users know: every recorded op's output carries a ``grad_fn`` node;
``node.next_functions`` lists ``(node, input_nr)`` per op input — the producer's node and which of
its outputs the input was, an ``AccumulateGrad`` for a leaf that requires grad, or ``(None, 0)``
for an input that needs no gradient.

A node keeps what its VJP needs in ``_saved`` (input Tensors, the op's result) and plain
parameters (axes, shapes) in ``_args``. ``_saved`` is dropped after a backward pass without
``retain_graph``; a later pass that needs it raises PyTorch's "backward through the graph a second
time" error, while nodes that saved no tensors can run again; nodes whose parameters torch keeps
as tensors (index arrays, masks) are released the same way. Saved inputs are checked against
their version counter, so an in-place change after saving is an error instead of a wrong result.

Saving the op's *result* would make a cycle (result -> node -> result), so results are saved as
bare arrays (``_Result``) and rebuilt as a Tensor whose ``grad_fn`` is the node itself when the
backward pass is recorded (``create_graph``) — the trick of PyTorch's ``SavedVariable``.
"""

from __future__ import annotations

import traceback
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tadiff.autograd import grad_mode
from tadiff.autograd.tensor import Tensor, _make, _make_outputs
from tadiff.errors import AutogradError

_FREED = "freed"  # marker stored in Node._saved once the buffers are released
_NO_EDGE = (None, 0)

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward."
)

_new = object.__new__
_ndarray = np.ndarray

# Anomaly mode flag, a one-element list so the hot path reads it without a function call.
ANOMALY = [False]


class _Result:
    """An op's own output saved for backward, without a reference back to its Tensor."""

    __slots__ = ("data", "nr", "vc")

    def __init__(self, data: np.ndarray, vc: list[int], nr: int):
        self.data = data
        self.vc = vc
        self.nr = nr


class _Extra:
    """Rarely used node state: hooks, retained-grad tensors, anomaly trace, metadata."""

    __slots__ = ("hooks", "metadata", "pre_hooks", "retains", "tensor_pre_hooks", "trace")

    def __init__(self) -> None:
        self.hooks: list[Callable[..., Any]] = []
        self.pre_hooks: list[Callable[..., Any]] = []
        self.tensor_pre_hooks: list[tuple[int, Callable[..., Any]]] = []
        self.retains: list[tuple[int, weakref.ref]] = []
        self.trace: list[str] | None = None
        self.metadata: dict[str, Any] = {}


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    __slots__ = ("_item", "_list")

    def __init__(self, hooks: list[Any], item: Any):
        self._list = hooks
        self._item = item

    def remove(self) -> None:
        """Unregister the hook (idempotent)."""
        for i, entry in enumerate(self._list):
            if entry is self._item:
                del self._list[i]
                return


# The methods the backward pass calls on every node. CPython specializes an attribute access
# for the one class it last saw at that place in the bytecode; a method shared by hundreds of
# node classes sees a different class on nearly every call and reads its slots the slow, generic
# way (about 150 instructions each, against 10). Each node class therefore gets these methods
# with a code object of its own (the same code, its own inline caches): 1-2% of the
# instructions of an LSTM's gradient, whose backward runs a thousand small nodes.
_PER_CLASS_METHODS = ("_apply", "_unpack", "_release")


def _own_code(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with a copy of its code object (see ``_PER_CLASS_METHODS``)."""
    copy = types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    copy.__module__ = fn.__module__
    copy.__annotations__ = fn.__annotations__
    copy.__dict__.update(fn.__dict__)
    return copy


class Node:
    """A backward function: maps gradients of an op's outputs to gradients of its inputs.

    Attributes:
        next_functions: tuple of ``(node, input_nr)`` per op input, PyTorch's layout (built
            on access: the node keeps the producers and their output numbers as two tuples,
            which saves the garbage collector one tracked pair per edge).

    Subclasses implement ``_apply(grads, create_graph)``: ``grads`` is the summed gradient of the
    single output (or a list, one per output, for multi-output nodes); it returns one gradient
    (or ``None``) per entry of ``next_functions``. Gradients are ndarrays during a plain backward
    pass and Tensors when ``create_graph`` records it.
    """

    __slots__ = ("__weakref__", "_args", "_extra", "_next", "_nrs", "_saved", "_versions")
    _n_outputs = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _PER_CLASS_METHODS:
            setattr(cls, name, _own_code(getattr(cls, name)))

    # True for nodes whose parameters hold data torch keeps as saved tensors (index arrays,
    # masks, a scalar factor): they are released with the saved tensors, so that a second
    # backward without retain_graph raises as in torch.
    _frees_args = False

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """``(node, input_nr)`` per op input: the producer's node (None for a constant) and
        which of its outputs the input was."""
        return tuple(zip(self._next, self._nrs, strict=True))

    @next_functions.setter
    def next_functions(self, edges: Sequence[tuple[Node | None, int]]) -> None:
        self._next = tuple([node for node, _ in edges])
        self._nrs = tuple([nr for _, nr in edges])

    def name(self) -> str:
        """The node's PyTorch-style name, e.g. ``MulBackward0``."""
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    def _get_extra(self) -> _Extra:
        extra = self._extra
        if extra is None:
            extra = self._extra = _Extra()
        return extra

    @property
    def metadata(self) -> dict[str, Any]:
        """A free-form dict attached to the node (anomaly mode stores the forward trace)."""
        return self._get_extra().metadata

    def register_hook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Call ``fn(grad_inputs, grad_outputs)`` after the node runs; it may return new
        ``grad_inputs``. Returns a handle with ``remove()``."""
        hooks = self._get_extra().hooks
        hooks.append(fn)
        return RemovableHandle(hooks, fn)

    def register_prehook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Call ``fn(grad_outputs)`` before the node runs; it may return new ``grad_outputs``."""
        hooks = self._get_extra().pre_hooks
        hooks.append(fn)
        return RemovableHandle(hooks, fn)

    def _apply(self, grads: Any, create_graph: bool) -> Sequence[Any]:
        raise NotImplementedError

    def _release(self) -> None:
        """Drop the saved tensors (after a backward pass without ``retain_graph``)."""
        if self._saved or self._frees_args:
            self._saved = _FREED
            if self._frees_args:
                self._args = ()

    def _unpack(self, create_graph: bool, as_tensors: bool = False) -> list[Any]:
        """The saved values, version-checked: arrays for a plain pass, Tensors when recorded."""
        saved = self._saved
        if saved is _FREED:
            raise AutogradError(FREED_MESSAGE)
        versions = self._versions
        values = []
        for i, s in enumerate(saved):
            kind = type(s)
            if kind is Tensor or (kind is not _Result and isinstance(s, Tensor)):
                vc = s._vc
                now = vc[0] if vc is not None else 0
                expected = versions[i] if versions is not None else 0
                if now != expected:
                    raise _modified_error(self, i, s.data, now, expected)
                values.append(s if (create_graph or as_tensors) else s.data)
            elif kind is _Result:
                if s.vc[0] != 0:
                    raise _modified_error(self, i, s.data, s.vc[0], 0)
                if create_graph:
                    values.append(_make(s.data, self, s.nr))
                else:
                    values.append(_make(s.data) if as_tensors else s.data)
            else:
                values.append(s)
        return values


def _modified_error(node: Node, index: int, data: np.ndarray, now: int, expected: int) -> Exception:
    shape = list(data.shape)
    return AutogradError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: saved tensor {index} of {node.name()} ({data.dtype} {shape}) is at version "
        f"{now}; expected version {expected} instead. Hint: replace the in-place operation by "
        "an out-of-place one, or clone the tensor before modifying it."
    )


class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds incoming gradients into ``variable.grad``.

    The leaf owns its node (one per leaf, reused by every graph) and the node refers back to the
    leaf weakly — no cycle, and nothing to rebuild for each new graph of a training loop. Once the
    leaf is gone its gradient could not be read anyway, so the node then does nothing.
    """

    __slots__ = ("_variable",)

    def __init__(self, variable: Tensor):
        self._variable = weakref.ref(variable)
        self._next = self._nrs = ()
        self._saved = ()
        self._versions = None
        self._args = ()
        self._extra = None

    @property
    def variable(self) -> Tensor | None:
        """The leaf tensor this node accumulates into (None once it was garbage collected)."""
        return self._variable()

    def _apply(self, grad: Any, create_graph: bool) -> Sequence[Any]:
        t = self._variable()
        if t is not None and t._rg:  # a leaf that stopped requiring grad gets none, as in torch
            accumulate_into(t, grad, create_graph)
        return ()


def accumulate_into(t: Tensor, grad: Any, create_graph: bool, owned: bool = False) -> None:
    """Add ``grad`` into ``t.grad`` after running ``t``'s leaf hooks (PyTorch's AccumulateGrad).

    ``owned`` says the caller holds the only reference to ``grad``: a first gradient is then
    kept as it is (when it is a writable base array of the leaf's dtype and shape) instead of
    being copied.
    """
    meta = t._meta
    if meta is not None and (meta.hooks or meta.post_hooks):
        if meta.hooks:
            grad = _run_tensor_hooks(meta.hooks, grad, create_graph)
        _accumulate(t, grad, create_graph, False)
        for hook in list(meta.post_hooks or ()):
            hook(t)
        return
    _accumulate(t, grad, create_graph, owned)


def _accumulate(t: Tensor, grad: Any, create_graph: bool, owned: bool) -> None:
    if create_graph:
        if type(grad) is not Tensor:
            grad = _make(np.asarray(grad))
        if grad.data.dtype != t.data.dtype:
            grad = grad.to(t.data.dtype)
        t._grad = grad if t._grad is None else t._grad + grad
        return
    if type(grad) is Tensor:
        grad = grad.data
    old = t._grad
    if (
        owned
        and old is None
        and grad.base is None
        and grad.flags.writeable
        and grad.dtype == t.data.dtype
        and grad.shape == t.data.shape
    ):
        t._grad = _make(grad)
        return
    if old is None or old.grad_fn is not None:
        # A fresh, writable copy: the incoming array may be shared or a read-only broadcast view.
        new = np.array(grad, dtype=t.data.dtype, copy=True)
        if new.shape != t.data.shape:
            raise AutogradError(
                f"gradient of shape {new.shape} reached a leaf of shape {t.data.shape}"
            )
        t._grad = _make(new) if old is None else old.detach() + _make(new)
    else:
        np.add(old.data, grad, out=old.data, casting="same_kind")


def _run_tensor_hooks(hooks: list[Any], grad: Any, create_graph: bool) -> Any:
    """Run user hooks on a gradient; hooks see Tensors, the engine keeps its own form."""
    as_tensor = grad if type(grad) is Tensor else _make(np.asarray(grad))
    for hook in list(hooks):
        result = hook(as_tensor)
        if result is not None:
            if not isinstance(result, Tensor):
                result = _make(np.asarray(result))
            if result.shape != as_tensor.shape:
                raise AutogradError(
                    f"hook {getattr(hook, '__name__', hook)!r} returned a gradient of shape "
                    f"{result.shape}; expected {as_tensor.shape}"
                )
            as_tensor = result
    return as_tensor if create_graph else as_tensor.data


def grad_accumulator(t: Tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad node (created on first use, then kept by the leaf)."""
    meta = t._get_meta()
    node = meta.acc
    if node is None:
        node = meta.acc = AccumulateGrad(t)
    return node


def edge(t: Tensor | None) -> tuple[Any, int]:
    """The ``(node, input_nr)`` pair through which a gradient reaches ``t`` (None: a constant)."""
    if t is None:
        return _NO_EDGE
    fn = t.grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    if t._rg:
        return (grad_accumulator(t), 0)
    return _NO_EDGE


_ZEROS = tuple((0,) * n for n in range(8))
_ONE_ZERO = _ZEROS[1]
_TWO_ZEROS = _ZEROS[2]


def _zeros(n: int) -> tuple[int, ...]:
    return _ZEROS[n] if n < 8 else (0,) * n


def _output_nrs(inputs: tuple[Tensor | None, ...]) -> tuple[int, ...]:
    """Which output of its producer each input is (0 for constants and leaves)."""
    return tuple([0 if t is None or t.grad_fn is None else t._output_nr for t in inputs])


def _versions_of(saved: tuple[Any, ...]) -> tuple[int, ...] | None:
    for s in saved:
        if type(s) is Tensor and s._vc is not None and s._vc[0]:
            return tuple(s._vc[0] if type(s) is Tensor and s._vc is not None else 0 for s in saved)
    return None


INPUTS: Any = ("the op's inputs",)
"""Pass as ``saved`` to :func:`record` when the VJP needs exactly the op's inputs: the inputs
tuple is then saved itself (one tuple allocation less per recorded op)."""


def _link(node: Node, inputs: tuple[Tensor | None, ...]) -> None:
    """Set ``node``'s producers and their output numbers from its ``inputs`` (the general case
    of :func:`record`: leaves, constants, any number of inputs)."""
    producers = []
    first_outputs = True  # every producer's output 0, the common case: shared zeros
    for t in inputs:  # edge(t), inlined: this is the hot path of every recorded op
        if t is None:
            producers.append(None)
        elif t.grad_fn is not None:
            producers.append(t.grad_fn)
            if t._output_nr:
                first_outputs = False
        elif t._rg:
            meta = t._meta
            acc = meta.acc if meta is not None else None
            producers.append(acc if acc is not None else grad_accumulator(t))
        else:
            producers.append(None)
    node._next = tuple(producers)
    node._nrs = _zeros(len(producers)) if first_outputs else _output_nrs(inputs)


def record(
    node_cls: type[Node],
    data: np.ndarray,
    inputs: tuple[Tensor, ...],
    saved: tuple[Any, ...] = (),
    args: tuple[Any, ...] = (),
    save_result: bool = False,
) -> Tensor:
    """Wrap ``data`` as the output of a recorded op (call only when grad is needed).

    Args:
        node_cls: the op's backward node class (from ``tadiff.ops.derivatives``).
        data: the op's result.
        inputs: the op's Tensor inputs, in the order of the node's VJP formulas.
        saved: values the VJP needs (input Tensors are version-checked and freed after
            backward), or :data:`INPUTS`; the result is appended when ``save_result``.
        args: plain parameters (axes, shapes) passed to the VJP after the saved values.

    Returns:
        The output Tensor, whose ``grad_fn`` is the new node.
    """
    node = node_cls()  # (node classes have no __init__: cheaper than object.__new__(node_cls))
    n = len(inputs)
    if n == 1 and inputs[0] is not None and inputs[0].grad_fn is not None:
        # one input made by an op (views, unary functions, reductions): no loop, no list
        t = inputs[0]
        node._next = (t.grad_fn,)
        node._nrs = _ONE_ZERO if not t._output_nr else (t._output_nr,)
    elif n == 2 and (a := inputs[0]) is not None and (fa := a.grad_fn) is not None:
        # binary arithmetic inside a program: the first input made by an op, the second made
        # by one too or a number (None), likewise
        b = inputs[1]
        if b is None:
            node._next = (fa, None)
            node._nrs = _TWO_ZEROS if not a._output_nr else (a._output_nr, 0)
        elif (fb := b.grad_fn) is not None:
            node._next = (fa, fb)
            node._nrs = (
                _TWO_ZEROS if not (a._output_nr or b._output_nr) else (a._output_nr, b._output_nr)
            )
        else:
            _link(node, inputs)
    else:
        _link(node, inputs)
    # _make(data, node, 0), inlined: one call less on the path of every recorded op
    if type(data) is not _ndarray:  # NumPy scalars (an op on 0-d arrays) become 0-d arrays
        data = np.asarray(data)
    out = _new(Tensor)
    out.data = data
    out._rg = True
    out._grad = None
    out.grad_fn = node
    out._output_nr = 0
    out._vc = None
    out._meta = None
    out._base = None
    if saved is INPUTS:
        saved = inputs
    if save_result:
        result = _new(_Result)  # _Result(data, vc, 0) without the call of __init__
        result.data = data
        result.vc = out._vc = [0]
        result.nr = 0
        saved = (*saved, result)
    node._saved = saved
    node._versions = None
    for s in saved:  # versions are recorded only when one is not 0 (rare: after in-place ops)
        if type(s) is Tensor and s._vc is not None and s._vc[0]:
            node._versions = _versions_of(saved)
            break
    node._args = args
    node._extra = None
    if ANOMALY[0]:
        node._get_extra().trace = traceback.format_stack()[:-2]
    return out


def record_multi(
    node_cls: type[Node],
    datas: Sequence[np.ndarray],
    inputs: tuple[Tensor, ...],
    args: tuple[Any, ...] = (),
    saved: tuple[Any, ...] = (),
    save_results: bool = False,
    alike: bool = False,
) -> tuple[Tensor, ...]:
    """Like :func:`record` for an op with several outputs (``unbind``, ``split``, ``eigh``).

    ``saved`` are version-checked like :func:`record`'s; ``save_results`` appends every output
    (under ``create_graph`` they come back as Tensors of this node, so the backward formula is
    differentiable in them). ``alike`` says every output has the first one's shape and dtype
    (``unbind``: the node then stores them once).
    """
    node = node_cls()
    _link(node, inputs)
    node._args = args
    node._extra = None
    n = node._n_outputs = len(datas)
    if alike and n:
        node._out_meta = ((datas[0].shape, datas[0].dtype),) * n
    else:
        node._out_meta = tuple([(d.shape, d.dtype) for d in datas])
    if ANOMALY[0]:
        node._get_extra().trace = traceback.format_stack()[:-2]
    outs = _make_outputs(datas, node)
    if save_results:
        results = []
        for i, out in enumerate(outs):
            vc = out._vc = [0]
            results.append(_Result(out.data, vc, i))
        saved = (*saved, *results)
    node._saved = saved
    node._versions = _versions_of(saved) if saved else None
    return outs


class MultiOutputNode(Node):
    """Base of nodes with several outputs: missing output gradients are filled with zeros."""

    __slots__ = ("_n_outputs", "_out_meta")

    def _zeros_for_missing(self, grads: list[Any], create_graph: bool) -> list[Any]:
        filled = []
        for g, meta in zip(grads, self._out_meta, strict=True):
            if g is None and meta is not None:  # None meta: an output that is not a Tensor
                g = np.zeros(*meta)
                if create_graph:
                    g = _make(g)
            filled.append(g)
        return filled


def register_tensor_hook(t: Tensor, hook: Callable[..., Any]) -> RemovableHandle:
    """Implementation of ``Tensor.register_hook`` (see there)."""
    if not t._rg:
        raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
    if t.grad_fn is None:
        meta = t._get_meta()
        if meta.hooks is None:
            meta.hooks = []
        meta.hooks.append(hook)
        return RemovableHandle(meta.hooks, hook)
    entry = (t._output_nr, hook)
    hooks = t.grad_fn._get_extra().tensor_pre_hooks
    hooks.append(entry)
    return RemovableHandle(hooks, entry)


def retain_grad(t: Tensor) -> None:
    """Implementation of ``Tensor.retain_grad``: a hook storing the gradient on a non-leaf."""
    if not t._rg:
        raise AutogradError("can't retain_grad on Tensor that has requires_grad=False")
    if t.grad_fn is None:
        return  # leaves keep their gradient anyway
    meta = t._get_meta()
    if meta.retains_grad:
        return
    meta.retains_grad = True
    t.grad_fn._get_extra().retains.append((t._output_nr, weakref.ref(t)))


def run_pre_hooks(node: Node, grads: Any, create_graph: bool) -> Any:
    """Tensor hooks, retained grads and node pre-hooks, in PyTorch's order, before ``node`` runs."""
    extra = node._extra
    multi = node._n_outputs != 1
    slots = list(grads) if multi else [grads]
    for nr, hook in list(extra.tensor_pre_hooks):
        if slots[nr] is not None:
            slots[nr] = _run_tensor_hooks([hook], slots[nr], create_graph)
    for nr, ref in extra.retains:
        t = ref()
        g = slots[nr]
        if t is not None and g is not None:
            g = g.detach() if type(g) is Tensor and not create_graph else g
            g = g if type(g) is Tensor else _make(np.array(g, copy=True))
            t._grad = g if t._grad is None else t._grad + g
    for hook in list(extra.pre_hooks):
        wrapped = tuple(_as_tensor_or_none(g) for g in slots)
        result = hook(wrapped)
        if result is not None:
            slots = [_unwrap(g, create_graph) for g in result]
    return slots if multi else slots[0]


def run_post_hooks(node: Node, grads_in: Sequence[Any], grads_out: Any, create_graph: bool) -> Any:
    """Node hooks ``hook(grad_inputs, grad_outputs)`` after ``node`` ran."""
    outs = grads_out if node._n_outputs != 1 else [grads_out]
    for hook in list(node._extra.hooks):
        result = hook(
            tuple(_as_tensor_or_none(g) for g in grads_in),
            tuple(_as_tensor_or_none(g) for g in outs),
        )
        if result is not None:
            if len(result) != len(grads_in):
                raise AutogradError(
                    f"hook {getattr(hook, '__name__', hook)!r} on {node.name()} returned "
                    f"{len(result)} gradients; expected {len(grads_in)} (one per next_functions "
                    "entry, None where no gradient flows)"
                )
            grads_in = [_unwrap(g, create_graph) for g in result]
    return grads_in


def _as_tensor_or_none(g: Any) -> Tensor | None:
    if g is None or type(g) is Tensor:
        return g
    return _make(np.asarray(g))


def _unwrap(g: Any, create_graph: bool) -> Any:
    if g is None:
        return None
    if create_graph:
        return g if isinstance(g, Tensor) else _make(np.asarray(g))
    return g.data if isinstance(g, Tensor) else np.asarray(g)


def anomaly_trace(node: Node) -> str:
    """The forward stack recorded for ``node`` in anomaly mode, or a hint to enable it."""
    extra = node._extra
    if extra is None or extra.trace is None:
        return "(enable td.autograd.detect_anomaly() to record where the op was created)"
    return "".join(extra.trace[-6:])


def grad_enabled() -> bool:
    """Shortcut used by ops modules: is graph recording on?"""
    return grad_mode._state.enabled
