"""Custom differentiable operations: ``Function`` with ``forward(ctx, ...)``/``backward(ctx, ...)``.

As in PyTorch, ``ctx`` *is* the backward node (``<Name>Backward``): ``Function.apply`` runs
``forward`` under ``no_grad``, then, when an input requires grad, makes the outputs point at
``ctx``. ``backward`` receives one gradient Tensor per output and returns one gradient per forward
input (a Tensor, an ndarray or None).

Each returned gradient is validated — count, shape and dtype must match the input exactly, or an
``AutogradError`` names the Function and the position. A backward written with tadiff ops is
recorded under ``create_graph`` and can be differentiated again; one that computes on raw arrays
must say so with ``@once_differentiable`` (returning an ndarray from an undecorated backward under
``create_graph`` is an error rather than a silently zero second derivative).

Example:
    >>> import tadiff as td
    >>> class Cube(td.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x.data ** 3
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return grad * 3 * x * x
    >>> x = td.tensor(2.0, requires_grad=True)
    >>> Cube.apply(x).backward(); x.grad
    tensor(12.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff.autograd import grad_mode
from tadiff.autograd.graph import (
    _NO_EDGE,
    ANOMALY,
    MultiOutputNode,
    Node,
    _Result,
    _versions_of,
    edge,
)
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import AutogradError

_state = grad_mode._state


class BackwardCFunction(MultiOutputNode):
    """The ``ctx`` of a custom Function and its backward node. Attributes set on it in
    ``forward`` (``ctx.factor = ...``) are available in ``backward``."""

    __slots__ = (
        "__dict__",
        "_dirty",
        "_in_meta",
        "_materialize",
        "_non_diff",
        "_to_save",
        "needs_input_grad",
    )
    _function: type[Function]

    def save_for_backward(self, *tensors: Any) -> None:
        """Save Tensors (inputs, outputs or None) for ``backward``; read them back with
        ``ctx.saved_tensors``. Outputs are saved without a reference cycle."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise AutogradError(
                    f"{self.name()}: save_for_backward can only save Tensors or None, but "
                    f"argument {i} is a {type(t).__name__} (store other values as ctx attributes)"
                )
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        """The saved tensors, checked against in-place modification since they were saved."""
        if self._to_save:  # still inside forward, or a forward that was not recorded
            return tuple(self._to_save)
        return tuple(self._unpack(_state.enabled, as_tensors=True))

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Declare inputs that ``forward`` modified in place (and returns): they become outputs
        of this node, keeping their identity, and their version counters move on, so that
        nodes that saved their old values refuse to run (as in torch)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *outputs: Tensor) -> None:
        """Declare outputs (e.g. integer indices) that never carry a gradient."""
        self._non_diff = {id(o) for o in outputs}

    def set_materialize_grads(self, value: bool) -> None:
        """Whether missing output gradients reach ``backward`` as zeros (default) or None."""
        self._materialize = bool(value)

    def _apply(self, grads: Any, create_graph: bool) -> list[Any]:
        fn = self._function
        slots = list(grads) if self._n_outputs != 1 else [grads]
        if self._materialize:
            slots = self._zeros_for_missing(slots, create_graph)
        as_tensors = []
        for g, meta in zip(slots, self._out_meta, strict=True):
            if g is not None:
                g = g if type(g) is Tensor else _make(np.asarray(g))
                if meta is not None and g.data.dtype != meta[1]:
                    # a wider-dtype consumer (float64 after a float32 output) sent its own
                    # dtype: backward sees the dtype of the output it belongs to, as in torch
                    g = g.to(meta[1])
            as_tensors.append(g)
        result = fn.backward(self, *as_tensors)
        if not isinstance(result, tuple):
            result = (result,)
        n_in = len(self._next)
        if len(result) < n_in or any(r is not None for r in result[n_in:]):
            raise AutogradError(
                f"function {self.name()} returned an incorrect number of gradients (expected "
                f"{n_in}, got {len(result)})"
            )
        once = getattr(fn.backward, "_once_differentiable", False)
        return [self._check_grad(i, r, create_graph, once) for i, r in enumerate(result[:n_in])]

    def _check_grad(self, i: int, r: Any, create_graph: bool, once: bool) -> Any:
        meta = self._in_meta[i]
        if meta is None:
            if r is not None:
                raise AutogradError(
                    f"function {self.name()} returned a gradient different than None at position "
                    f"{i}, but the corresponding forward input was not a Tensor"
                )
            return None
        if r is None or self._next[i] is None:
            return None
        if isinstance(r, Tensor):
            data = r.data
        elif isinstance(r, (np.ndarray, np.generic)):
            if create_graph and not once:
                raise AutogradError(
                    f"function {self.name()} returned a NumPy array as gradient {i} while "
                    "create_graph=True, so it cannot be differentiated again: write backward "
                    "with tadiff ops, or decorate it with @once_differentiable"
                )
            data = np.asarray(r)
            r = _make(data)
        else:
            raise AutogradError(
                f"function {self.name()} returned a {type(r).__name__} as gradient {i}; "
                "expected a Tensor, an ndarray or None"
            )
        shape, dtype = meta
        if data.shape != shape:
            raise AutogradError(
                f"Function {self.name()} returned an invalid gradient at index {i} - got "
                f"{list(data.shape)} but expected shape {list(shape)}"
            )
        if data.dtype != dtype:
            raise AutogradError(
                f"Function {self.name()} returned an invalid gradient at index {i} - expected "
                f"dtype {dtype} but got {data.dtype}"
            )
        return r if create_graph else data


class Function:
    """Base class of custom differentiable operations (see the module docstring).

    Subclasses define ``forward(ctx, *args)`` and ``backward(ctx, *grads)`` as static methods and
    are called through ``apply``.
    """

    _backward_cls: type[BackwardCFunction]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._separate_context = cls.setup_context is not Function.setup_context
        cls._backward_cls = type(
            f"{cls.__name__}Backward",
            (BackwardCFunction,),
            {"__slots__": (), "_function": cls, "__module__": cls.__module__},
        )

    @staticmethod
    def forward(ctx: BackwardCFunction, *args: Any, **kwargs: Any) -> Any:
        """Compute the outputs from the inputs (Tensors arrive as Tensors; runs under no_grad).

        Two styles, as in torch: ``forward(ctx, *args)``, or ``forward(*args)`` without ``ctx``
        together with :meth:`setup_context` (the style ``torch.func`` needs).
        """
        raise NotImplementedError("subclasses of Function must implement forward")

    @staticmethod
    def setup_context(ctx: BackwardCFunction, inputs: tuple[Any, ...], output: Any) -> Any:
        """Save what ``backward`` needs: called after ``forward(*inputs)`` (which then takes no
        ``ctx``) with its inputs and output. Defined by subclasses that use that style."""
        raise NotImplementedError("setup_context is defined by subclasses that use it")

    @staticmethod
    def backward(ctx: BackwardCFunction, *grads: Tensor) -> Any:
        """Gradients of the inputs from the gradients of the outputs."""
        raise NotImplementedError("subclasses of Function must implement backward")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Run ``forward`` and record the node when an input requires grad.

        Returns:
            What ``forward`` returned, with ndarrays wrapped as Tensors.
        """
        node_cls = cls._backward_cls
        ctx = node_cls.__new__(node_cls)
        ctx._saved = ()
        ctx._versions = None
        ctx._args = ()
        ctx._extra = None
        ctx._to_save = ()
        ctx._non_diff = set()
        ctx._materialize = True
        ctx._dirty = ()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg for a in args)
        recording = _state.enabled and any(ctx.needs_input_grad)
        previous = _state.enabled
        _state.enabled = False
        try:
            if cls._separate_context:
                raw = cls.forward(*args)
                cls.setup_context(ctx, args, raw)
            else:
                raw = cls.forward(ctx, *args)
        finally:
            _state.enabled = previous
        is_tuple = isinstance(raw, tuple)
        dirty = ctx._dirty
        outs = [_wrap_output(o, args, dirty) for o in (raw if is_tuple else (raw,))]
        if dirty:
            _check_dirty(ctx, args, outs, recording)
            for t in dirty:  # modified in place: savers of the old value must refuse to run
                _bump_version(t)
        if recording:
            _connect(ctx, args, outs)
        return tuple(outs) if is_tuple else outs[0]


def _wrap_output(o: Any, args: tuple[Any, ...], dirty: tuple[Tensor, ...]) -> Any:
    if isinstance(o, (np.ndarray, np.generic)):
        return _make(np.asarray(o))
    if isinstance(o, Tensor):
        if any(o is t for t in dirty):
            return o  # an input modified in place (mark_dirty): it becomes the output
        if o.grad_fn is not None or o._rg or any(o is a for a in args):
            return _make(o.data)  # never rewire an input's or another graph's tensor
        return o
    return o


def _check_dirty(
    ctx: BackwardCFunction, args: tuple[Any, ...], outs: list[Any], recording: bool
) -> None:
    """torch's rules for ``mark_dirty``: a dirty tensor is an input returned as an output, and
    a leaf that requires grad cannot be modified in place while recording."""
    for t in ctx._dirty:
        if not any(t is a for a in args):
            raise AutogradError(f"{ctx.name()}: mark_dirty was given a tensor that is no input")
        if not any(t is o for o in outs):
            raise AutogradError(
                f"{ctx.name()}: a tensor marked dirty (modified in place) must be returned as an "
                "output of forward"
            )
        if recording and t.grad_fn is None and t._rg:
            raise AutogradError(
                "a leaf Variable that requires grad is being used in an in-place operation "
                f"({ctx.name()} marked it dirty)"
            )


def _bump_version(t: Tensor) -> None:
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    vc[0] += 1


def _connect(ctx: BackwardCFunction, args: tuple[Any, ...], outs: list[Any]) -> None:
    ctx.next_functions = tuple(edge(a) if isinstance(a, Tensor) else _NO_EDGE for a in args)
    ctx._in_meta = tuple(
        (a.data.shape, a.data.dtype) if isinstance(a, Tensor) else None for a in args
    )
    ctx._n_outputs = len(outs)
    ctx._out_meta = tuple(
        (o.data.shape, o.data.dtype) if isinstance(o, Tensor) else None for o in outs
    )
    for k, o in enumerate(outs):
        if isinstance(o, Tensor) and id(o) not in ctx._non_diff and o.data.dtype.kind == "f":
            o.grad_fn = ctx
            o._output_nr = k
            o._rg = True
    saved = []
    for t in ctx._to_save:
        k = next((k for k, o in enumerate(outs) if o is t), None)
        if k is not None and t.grad_fn is ctx:
            vc = t._vc = t._vc or [0]
            saved.append(_Result(t.data, vc, k) if vc[0] == 0 else t)
        else:
            saved.append(t)
    ctx._saved = tuple(saved)
    ctx._versions = _versions_of(ctx._saved)
    ctx._to_save = ()
    if ANOMALY[0]:
        import traceback

        ctx._get_extra().trace = traceback.format_stack()[:-3]


class _DelayedError(Node):
    """Stands in for the backward of a once-differentiable Function under ``create_graph``:
    differentiating through it raises instead of silently giving zero."""

    __slots__ = ("_fname",)

    def _apply(self, grads: Any, create_graph: bool) -> list[Any]:
        raise AutogradError(
            f"trying to differentiate twice a function that was marked with @once_differentiable "
            f"({self._fname})"
        )


def once_differentiable(backward: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a ``backward`` that computes on raw arrays (not differentiable again).

    It runs under ``no_grad``; under ``create_graph`` its results are marked so that a later
    attempt to differentiate through them raises an ``AutogradError``.
    """

    @functools.wraps(backward)
    def wrapper(ctx: BackwardCFunction, *grads: Any) -> Any:
        recording = _state.enabled
        _state.enabled = False
        try:
            result = backward(ctx, *grads)
        finally:
            _state.enabled = recording
        if not recording:
            return result
        single = not isinstance(result, tuple)
        results = (result,) if single else result
        sources = [*ctx.next_functions]
        sources += [edge(g) for g in grads if isinstance(g, Tensor) and g._rg]
        wrapped = []
        for r in results:
            if r is None:
                wrapped.append(None)
                continue
            data = r.data if isinstance(r, Tensor) else np.asarray(r)
            node = _DelayedError.__new__(_DelayedError)
            node.next_functions = tuple(s for s in sources if s[0] is not None)
            node._saved = ()
            node._versions = None
            node._args = ()
            node._extra = None
            node._fname = ctx.name()
            wrapped.append(_make(data, node, 0) if node._next else _make(data))
        return wrapped[0] if single else tuple(wrapped)

    wrapper._once_differentiable = True
    return wrapper
