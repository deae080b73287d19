"""Index-notation functions as autograd engine operations.

Calling a :class:`~tadiff.index.TensorFunction` on tadiff Tensors runs its compiled forward
kernel and records one node. That node's backward evaluates the compiled kernels of the derived
functions ``f.grad(name)`` — gather form, one output element at a time, no scatter. Under
``create_graph=True`` the backward instead *calls* those derived TensorFunctions on Tensors, so
each is recorded as an engine op of its own and is differentiated by re-derivation: second (and
higher) order gradients need no hand-written rule.

Example:
    >>> import numpy as np, tadiff as td
    >>> from tadiff.index import define
    >>> f = define("y[t] = sum[k](x[t+k] * w[k])")
    >>> x = td.tensor(np.arange(5.0), requires_grad=True)
    >>> w = td.tensor(np.ones(2), requires_grad=True)
    >>> y = f(x=x, w=w); y.sum().backward()
    >>> x.grad.data.tolist(), w.grad.data.tolist()
    ([1.0, 2.0, 2.0, 2.0, 1.0], [6.0, 10.0])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tadiff.autograd.grad_mode import is_grad_enabled
from tadiff.autograd.graph import Node, record
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import DTypeError
from tadiff.index.compile.cache import (
    CacheKey,
    cached,
    gradient_kernel,
    gradient_key,
    kernel,
    kernel_key,
)

__all__ = [
    "IndexOpBackward",
    "call_engine",
    "evaluate_arrays",
    "evaluate_gradients",
    "saved_output",
]


def _data(value: object) -> np.ndarray:
    return value.data if isinstance(value, Tensor) else np.asarray(value)


def _compute_dtype(fn, values: Mapping[str, object]) -> np.dtype:
    """float32 when every float argument is float32, else float64 (as in NumPy promotion)."""
    kinds = []
    for name in fn.args:
        data = _data(values[name])
        if data.dtype.kind not in "biuf":
            raise DTypeError(
                f"argument {name} of {fn.out_name} must be a real number array, got dtype "
                f"{data.dtype}"
            )
        kinds.append(data.dtype)
    floats = [d for d in kinds if d.kind == "f"]
    if floats and all(d == np.float32 for d in floats):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def evaluate_arrays(
    fn, values: Mapping[str, object], backend: str, saved: Mapping[str, tuple] | None = None
) -> np.ndarray:
    """``fn`` on raw arrays through its cached compiled kernel (no graph).

    ``saved`` maps a name to ``(function, array)``: that function's output for the same
    arguments, which the kernel may read instead of recomputing it (a forward's output, for
    its derivatives).
    """
    if saved:
        dtype = _compute_dtype(fn, values)
        arrays = {n: _data(values[n]).astype(dtype, copy=False) for n in fn.args}
        known = {}
        for name, (source, array) in saved.items():
            arrays[name] = np.asarray(array).astype(dtype, copy=False)
            known[name] = (source, arrays[name].shape)
        shapes = {n: arrays[n].shape for n in fn.args}
        return kernel(fn, shapes, dtype, backend, known)(arrays)
    data = [_data(values[n]) for n in fn.args]
    layout = (backend, *[(a.shape, a.dtype) for a in data])
    found = fn._layouts.get(layout)
    if found is None:
        fn._arrays(dict(zip(fn.args, data, strict=True)), convert=False)  # raises on bad input
        dtype = _compute_dtype(fn, values)
        shapes = {n: a.shape for n, a in zip(fn.args, data, strict=True)}
        found = _remember(fn, layout, dtype, kernel_key(fn, shapes, dtype, backend, {}))
    dtype, key = found
    compiled = cached(key)
    if compiled is None:  # first call for this layout, or dropped from the cache since
        shapes = {n: a.shape for n, a in zip(fn.args, data, strict=True)}
        compiled = kernel(fn, shapes, dtype, backend)
    return compiled({n: a.astype(dtype, copy=False) for n, a in zip(fn.args, data, strict=True)})


def _remember(fn, layout: tuple, dtype: np.dtype, key: CacheKey) -> tuple[np.dtype, CacheKey]:
    """Note that ``fn``'s arguments of this ``layout`` were checked and compile to the kernel
    cached under ``key`` (a few hundred layouts per function at most)."""
    if len(fn._layouts) >= _LAYOUTS_KEPT:
        fn._layouts.clear()
    fn._layouts[layout] = found = (dtype, key)
    return found


_LAYOUTS_KEPT = 256


def evaluate_gradients(
    fn,
    wrts: tuple[str, ...],
    values: Mapping[str, object],
    backend: str,
    output: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """``fn``'s derivatives with respect to ``wrts`` on raw arrays, computed together
    (derivatives sharing their loops in one nest), reading the forward's ``output`` if given.

    Args:
        fn: the forward TensorFunction.
        wrts: argument names.
        values: ``fn``'s arguments and the incoming gradient (under ``fn.grad_name``).
        backend: kernel backend.
        output: the forward's output, which the kernels read instead of recomputing it.
    """
    names = (*fn.args, fn.grad_name)
    data = [_data(values[n]) for n in names]
    reads = output is not None and fn.out_name not in names
    if reads:
        names, data = (*names, fn.out_name), [*data, np.asarray(output)]
    layout = ("gradients", wrts, backend, *[(a.shape, a.dtype) for a in data])
    found = fn._layouts.get(layout)
    if found is None:
        probe = fn.grad(wrts[0])
        dtype = _compute_dtype(probe, {n: values[n] for n in probe.args})
        shapes, known = _gradient_shapes(fn, names, data, reads)
        found = _remember(
            fn, layout, dtype, gradient_key(fn, tuple(wrts), shapes, dtype, backend, known)
        )
    dtype, key = found
    compiled = cached(key)
    if compiled is None:  # first call for this layout, or dropped from the cache since
        shapes, known = _gradient_shapes(fn, names, data, reads)
        compiled = gradient_kernel(fn, tuple(wrts), shapes, dtype, backend, known)
    return compiled({n: a.astype(dtype, copy=False) for n, a in zip(names, data, strict=True)})


def _gradient_shapes(fn, names: tuple[str, ...], data: list, reads: bool) -> tuple[dict, dict]:
    """The argument shapes of ``fn``'s gradient kernel and what it reads of the forward (its
    output, last in ``names`` when ``reads``)."""
    shapes = {n: a.shape for n, a in zip(names, data, strict=True)}
    known = {fn.out_name: (fn, shapes.pop(fn.out_name))} if reads else {}
    return shapes, known


def saved_output(fn, derivative, output: np.ndarray) -> dict[str, tuple]:
    """What a derivative's kernel may read of its forward: the output, under the forward's name
    (unless the derivative has an argument of that name)."""
    if fn.out_name in derivative.args:
        return {}
    return {fn.out_name: (fn, output)}


class IndexOpBackward(Node):
    """The recorded node of an index-notation call (see the module docstring).

    Saved: the call's argument Tensors, then its output where a needed derivative reads it.
    Args: ``(fn, backend, reads_output)``. Inputs whose producer is None need no gradient.
    """

    __slots__ = ()

    def _apply(self, grad: Any, create_graph: bool) -> list[Any]:
        fn, backend, reads_output = self._args
        saved = self._unpack(create_graph)
        inputs = saved[: len(fn.args)]
        values = {**dict(zip(fn.args, inputs, strict=True)), fn.grad_name: grad}
        needed = [p is not None for p in self._next]
        if not create_graph:
            # every needed derivative at once: those sharing loops run as one nest
            wrts = tuple(n for n, need in zip(fn.args, needed, strict=True) if need)
            output = saved[-1] if reads_output else None
            computed = evaluate_gradients(fn, wrts, values, backend, output)
            return [
                computed[n].astype(x.dtype, copy=False) if need else None
                for n, x, need in zip(fn.args, inputs, needed, strict=True)
            ]
        grads: list[Any] = []
        for name, t, need in zip(fn.args, inputs, needed, strict=True):
            if not need:
                grads.append(None)
                continue
            # create_graph: record the derivative as an op of its own, differentiable again
            derivative = fn.grad(name)
            g = call_engine(derivative, {n: values[n] for n in derivative.args}, backend)
            grads.append(g if g.data.dtype == t.data.dtype else g.to(t.data.dtype))
        return grads


def call_engine(fn, values: Mapping[str, object], backend: str = "auto") -> Tensor:
    """Evaluate ``fn`` on Tensors (or arrays) as one recorded engine operation.

    Args:
        fn: a TensorFunction.
        values: argument name -> Tensor or array (arrays are constants).
        backend: kernel backend (see :data:`~tadiff.index.compile.BACKENDS`).

    Returns:
        A Tensor of ``fn``'s output shape; float32 when every float argument is float32.

    Raises:
        InputError: a missing or unexpected argument.
        DTypeError, ShapeError: an argument that does not fit (checked once per layout).
    """
    tensors = tuple([values.get(n) for n in fn.args])
    if len(values) != len(tensors) or not all(isinstance(t, Tensor) for t in tensors):
        tensors = _as_tensors(fn, values)
    data = evaluate_arrays(fn, dict(zip(fn.args, tensors, strict=True)), backend)
    if not (is_grad_enabled() and any(t._rg for t in tensors)):
        return _make(data)
    # the output is saved too where a needed derivative reads it instead of recomputing the
    # forward (so modifying it in place before the backward is an error, as in torch)
    reads = any(fn.grad_reads_output(n) for n, t in zip(fn.args, tensors, strict=True) if t._rg)
    return record(IndexOpBackward, data, tensors, tensors, (fn, backend, reads), save_result=reads)


def _as_tensors(fn, values: Mapping[str, object]) -> tuple[Tensor, ...]:
    """The arguments as Tensors (arrays and numbers become constants), checked first."""
    fn._arrays({n: _data(v) if isinstance(v, Tensor) else v for n, v in values.items()}, False)
    return tuple(
        v if isinstance(v, Tensor) else Tensor(np.asarray(v)) for v in (values[n] for n in fn.args)
    )
