"""Index-notation ops on torch tensors, with derived backward: ``tadiff.torch.define``.

``define("y[b,o,t] = sum[c,k](x[b,c,t+k] * w[o,c,k])")`` gives an op you call with torch tensors
inside ``torch.autograd``. Its forward runs the compiled kernel of the definition
(:mod:`tadiff.index.compile`: einsum, vectorized NumPy or Numba), its backward the compiled
kernels of the *derived* functions ``f.grad(name)`` — gather form, no scatter. Under
``create_graph`` the backward calls those derived functions as ops of their own, so second and
higher derivatives come from re-derivation, with no hand-written rule.

Devices: CPU tensors run the NumPy (or Numba) kernels, viewed as NumPy arrays without a copy;
tensors on another device (CUDA) run the **Triton** kernels of
:mod:`tadiff.index.compile.triton_backend` on the tensors themselves (backend ``"auto"`` picks
it; ``backend="triton"`` forces it, also on CPU under ``TRITON_INTERPRET=1``, which is how it is
tested here — no GPU was available). There is no torch-native (vectorized torch ops) lowering,
so other devices (MPS, XPU) are refused. The result is a fresh tensor. Under ``torch.compile``
a call is a graph break (it runs eagerly; not yet a ``torch.library`` op). Arguments are
computed in float32 when every float argument is float32, else float64; each gradient comes
back in its argument's dtype.

Example:
    >>> import torch
    >>> f = define("y[i] = sum[k](x[i+k] * w[k])")
    >>> x = torch.arange(5.0, dtype=torch.float64, requires_grad=True)
    >>> w = torch.ones(2, dtype=torch.float64, requires_grad=True)
    >>> f(x=x, w=w).sum().backward()
    >>> x.grad.tolist(), w.grad.tolist()
    ([1.0, 2.0, 2.0, 2.0, 1.0], [6.0, 10.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tadiff.errors import DTypeError, InputError
from tadiff.index import TensorFunction
from tadiff.index import define as _define_index
from tadiff.index.compile.cache import kernel
from tadiff.index.compile.engine_op import evaluate_arrays, evaluate_gradients, saved_output

__all__ = ["TorchIndexFunction", "define"]


class _IndexOp(torch.autograd.Function):
    """One index-notation definition as a torch op (see the module docstring)."""

    @staticmethod
    def forward(ctx: Any, fn: TensorFunction, backend: str, *tensors: torch.Tensor) -> Any:
        ctx.fn, ctx.backend = fn, backend
        out = _evaluate(fn, dict(zip(fn.args, tensors, strict=True)), backend)
        # the output is saved too where a needed derivative reads it instead of recomputing the
        # forward (so modifying it in place before the backward is an error, as in torch)
        needed = [n for n, need in zip(fn.args, ctx.needs_input_grad[2:], strict=True) if need]
        reads = any(fn.grad_reads_output(n) for n in needed)
        ctx.save_for_backward(*tensors, out if reads else None)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        fn, backend = ctx.fn, ctx.backend
        *tensors, out = ctx.saved_tensors
        values = {**dict(zip(fn.args, tensors, strict=True)), fn.grad_name: grad}
        needed = ctx.needs_input_grad[2:]
        wrts = tuple(n for n, need in zip(fn.args, needed, strict=True) if need)
        together = {}
        if not torch.is_grad_enabled() and wrts and _on_numpy(values, fn, backend):
            # every needed derivative at once: those sharing loops run as one nest
            arrays = {n: _as_array(values[n]) for n in (*fn.args, fn.grad_name)}
            output = None if out is None else _as_array(out)
            computed = evaluate_gradients(fn, wrts, arrays, backend, output)
            together = {n: torch.from_numpy(g) for n, g in computed.items()}
        grads: list[Any] = [None, None]
        for name, t, need in zip(fn.args, tensors, needed, strict=True):
            if not need:
                grads.append(None)
                continue
            derivative = fn.grad(name)
            inputs = {n: values[n] for n in derivative.args}
            if torch.is_grad_enabled():
                # create_graph: the derivative is an op of its own, differentiable again
                g = _IndexOp.apply(derivative, backend, *(inputs[n] for n in derivative.args))
            elif name in together:
                g = together[name]
            else:
                saved = {} if out is None else saved_output(fn, derivative, out)
                g = _evaluate(derivative, inputs, backend, saved)
            grads.append(g.to(t.dtype))
        return tuple(grads)


def _on_numpy(values: dict[str, torch.Tensor], fn: TensorFunction, backend: str) -> bool:
    """Whether these tensors run the NumPy/Numba kernels (all on the CPU, no Triton asked)."""
    return backend != "triton" and all(values[n].device.type == "cpu" for n in fn.args)


def _as_array(t: torch.Tensor) -> np.ndarray:
    return t.detach().resolve_conj().resolve_neg().numpy()


def _evaluate(
    fn: TensorFunction,
    values: dict[str, torch.Tensor],
    backend: str,
    saved: dict[str, tuple] | None = None,
) -> torch.Tensor:
    devices = {values[n].device for n in fn.args}
    if len(devices) > 1:
        raise InputError(
            f"{fn.out_name}: the arguments are on different devices "
            f"({', '.join(f'{n} on {values[n].device}' for n in fn.args)}); expected one device"
        )
    device = devices.pop()
    if device.type not in ("cpu", "cuda"):
        raise InputError(
            f"{fn.out_name}: the arguments are on {device}; tadiff.torch.define runs on CPU "
            "(NumPy kernels) and CUDA (Triton kernels)"
        )
    on_cpu = device.type == "cpu"
    if backend == "triton" or not on_cpu:
        if backend not in ("auto", "triton"):
            raise InputError(
                f"{fn.out_name}: tensors off the CPU need backend 'triton' (or 'auto'), not "
                f"{backend!r}: the {backend} kernels run on NumPy arrays"
            )
        # the Triton kernel takes torch tensors and returns one on their device
        dtype = _compute_dtype(values)
        tensors = {n: values[n].detach().to(_TORCH[dtype]) for n in fn.args}
        known = {}
        for name, (source, array) in (saved or {}).items():
            tensors[name] = array.detach().to(_TORCH[dtype])
            known[name] = (source, tuple(array.shape))
        shapes = {n: tuple(values[n].shape) for n in fn.args}
        return kernel(fn, shapes, dtype, "triton", known)(tensors)
    arrays = {n: _as_array(values[n]) for n in fn.args}
    numpy_saved = {
        name: (source, _as_array(array)) for name, (source, array) in (saved or {}).items()
    }
    return torch.from_numpy(evaluate_arrays(fn, arrays, backend, numpy_saved))


_TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}


def _compute_dtype(values: dict[str, torch.Tensor]) -> np.dtype:
    """float32 when every float argument is float32, else float64 (as the NumPy path)."""
    floats = [t.dtype for t in values.values() if t.is_floating_point()]
    if floats and all(d == torch.float32 for d in floats):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


class TorchIndexFunction:
    """An index-notation definition callable on torch tensors; made by :func:`define`.

    Attributes:
        definition: the :class:`tadiff.index.TensorFunction` (print it; ``.grad(name)`` shows
            the derived functions the backward runs).
        backend: kernel backend, ``"auto"``, ``"einsum"``, ``"numpy"`` or ``"numba"``.
    """

    def __init__(self, definition: TensorFunction, backend: str = "auto"):
        self.definition = definition.using(backend)
        self.backend = backend

    # The kernels are NumPy code that Dynamo must not trace: under torch.compile the call is a
    # graph break and runs eagerly (correct, not compiled).
    @torch.compiler.disable
    def __call__(self, **tensors: torch.Tensor) -> torch.Tensor:
        """Evaluate on torch tensors given by argument name; differentiable wrt each.

        Raises:
            DTypeError: an argument is not a torch tensor.
            InputError: a missing or unknown argument name, or a tensor off the CPU.
            ShapeError, BoundsError: shapes that do not fit the definition.
        """
        fn = self.definition
        missing = [n for n in fn.args if n not in tensors]
        extra = [n for n in tensors if n not in fn.args]
        if missing or extra:
            raise InputError(
                f"{fn.out_name} takes the arguments {', '.join(fn.args)}; "
                + (f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}")
            )
        for name in fn.args:
            if not isinstance(tensors[name], torch.Tensor):
                raise DTypeError(
                    f"{fn.out_name}: argument {name} must be a torch tensor, got "
                    f"{type(tensors[name]).__name__}"
                )
        return _IndexOp.apply(fn, self.backend, *(tensors[n] for n in fn.args))

    def explain(self, dtype: object = np.float32, **shapes: tuple[int, ...]) -> str:
        """The plan of the forward and of each derivative for these argument shapes (see
        :meth:`tadiff.index.TensorFunction.explain`).

        Example:
            >>> op = define("y[i] = sum[k](x[i+k] * w[k])")
            >>> "stage 1 (result)" in op.explain(x=(10,), w=(3,))
            True
        """
        return self.definition.explain(dtype, self.backend, **shapes)

    def __repr__(self) -> str:
        return f"tadiff.torch.define({str(self.definition)!r}, backend={self.backend!r})"


def define(source: str, backend: str = "auto") -> TorchIndexFunction:
    """An index-notation op for torch tensors, with derived backward (CPU).

    Args:
        source: the definition, e.g. ``"y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])"``
            (syntax: docs/index-notation.md).
        backend: kernel backend (see :data:`tadiff.index.compile.BACKENDS`).

    Returns:
        A :class:`TorchIndexFunction`; call it with keyword tensors.

    Raises:
        ParseError: with the column at fault; InputError for an unknown backend.

    Example:
        >>> conv = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
        >>> conv(x=torch.ones(2, 3, 9), w=torch.ones(4, 3, 3)).shape
        torch.Size([2, 4, 4])
    """
    return TorchIndexFunction(_define_index(source), backend)
