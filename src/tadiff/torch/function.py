"""Run a tadiff ``Function`` inside ``torch.autograd``: one class, two engines.

:func:`function` turns a subclass of :class:`tadiff.autograd.Function` into a
``torch.autograd.Function`` that calls the *same* ``forward`` and ``backward`` on torch tensors,
so the computation stays on the inputs' device and in their dtype.

The contract a tadiff Function must meet to be portable:

* Compute with the array namespace of the inputs, ``xp = tadiff._array.namespace(x)`` (``tadiff``
  for engine Tensors, ``torch`` here), and with methods and operators both share: ``@``, ``+``,
  ``*``, ``xp.exp``, ``xp.einsum``, ``xp.where``, ``x.sum(dim=..., keepdim=...)``, ``x.mT``,
  ``x.reshape``, indexing. NumPy-only spellings (``np.*`` on the inputs, ``astype``,
  ``keepdims=``) do not port.
* Make new arrays from an input (``xp.zeros_like(x)``, ``xp.ones_like(x)``) or with
  ``dtype=x.dtype``, so device and dtype follow the inputs.
* Use only the ``ctx`` API both engines have: ``save_for_backward``, ``saved_tensors``,
  ``needs_input_grad``, ``mark_non_differentiable``, ``set_materialize_grads`` and plain
  attributes (``ctx.factor = 2.0``).
* Save only inputs and outputs with ``save_for_backward``; recompute other intermediates in
  ``backward``. An intermediate of ``forward`` (which runs without recording) is a constant to
  a second derivative in both engines, so saving one gives wrong higher-order gradients.
* Return from ``backward`` one gradient per ``forward`` argument (None for non-tensors), of the
  input's shape.
* A backward written with ``xp`` ops is differentiable again in both engines (``create_graph``,
  ``gradgradcheck``). A backward decorated with ``tadiff.autograd.once_differentiable`` runs
  without recording here too, and a second derivative through it raises ``AutogradError`` —
  also with respect to the saved tensors, where torch's own ``once_differentiable`` would
  silently give zeros.

NumPy arrays returned by ``forward`` or ``backward`` are accepted only for CPU inputs and are
copied into tensors of the inputs' device; they cut the graph, so such a backward must be
``once_differentiable``.

Example:
    >>> import torch
    >>> import tadiff as td
    >>> from tadiff._array import namespace
    >>> class Cube(td.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x * x
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return grad * 3 * x * x
    >>> TorchCube = function(Cube)
    >>> x = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    >>> TorchCube.apply(x).backward(); x.grad
    tensor(12., dtype=torch.float64)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tadiff.autograd.function import Function
from tadiff.errors import AutogradError, DTypeError
from tadiff.torch._once import refuse_second_order

__all__ = ["function"]

_CACHE_ATTR = "_tadiff_torch_function"


def function(fn_cls: type[Function]) -> type[torch.autograd.Function]:
    """The ``torch.autograd.Function`` running a tadiff ``Function``'s code on torch tensors.

    Works as a call or as a class decorator. The torch class is made once per tadiff class and
    cached; it keeps the tadiff class as ``tadiff_function``, so after ``@function`` both stay
    reachable (``TorchFn.tadiff_function.apply`` runs in tadiff's engine).

    Args:
        fn_cls: a subclass of :class:`tadiff.autograd.Function` meeting the module's contract.

    Returns:
        A subclass of ``torch.autograd.Function`` of the same name; call ``.apply(*args)``.
        Its backward node is ``<Name>Backward`` as in torch.

    Raises:
        DTypeError: ``fn_cls`` is not a tadiff Function subclass.

    Example:
        >>> import tadiff as td
        >>> @function
        ... class Double(td.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return x * 2
        ...     @staticmethod
        ...     def backward(ctx, grad):
        ...         return grad * 2
        >>> Double.apply(torch.ones(2, requires_grad=True)).grad_fn.name()
        'DoubleBackward'
    """
    if not (isinstance(fn_cls, type) and issubclass(fn_cls, Function)):
        raise DTypeError(
            f"tadiff.torch.function expects a subclass of tadiff.autograd.Function, got {fn_cls!r}"
        )
    cached = fn_cls.__dict__.get(_CACHE_ATTR)
    if cached is not None:
        return cached
    name = fn_cls.__name__
    tadiff_forward = fn_cls.forward
    tadiff_backward = fn_cls.backward
    once = getattr(tadiff_backward, "_once_differentiable", False)
    if once:
        # tadiff's wrapper consults tadiff's grad mode and makes engine Tensors: unwrap it.
        tadiff_backward = tadiff_backward.__wrapped__
    refusal = (
        f"function {name}: its backward is marked @once_differentiable and cannot be "
        "differentiated again"
    )

    def forward(ctx: Any, *args: Any) -> Any:
        ctx._tadiff_device = _device_of(args)  # a device, not a tensor: no reference kept
        out = tadiff_forward(ctx, *args)
        if isinstance(out, tuple):
            return tuple(
                _as_torch(o, ctx._tadiff_device, name, "forward", k) for k, o in enumerate(out)
            )
        return _as_torch(out, ctx._tadiff_device, name, "forward", 0)

    def backward(ctx: Any, *grads: Any) -> Any:
        if once:
            with torch.no_grad():
                result = tadiff_backward(ctx, *grads)
        else:
            result = tadiff_backward(ctx, *grads)
        single = not isinstance(result, tuple)
        results = (result,) if single else result
        results = tuple(
            _as_torch(r, ctx._tadiff_device, name, "backward", k) for k, r in enumerate(results)
        )
        if once:  # tie the results to what they depend on, so a second derivative raises
            results = refuse_second_order(refusal, results, (*ctx.saved_tensors, *grads))
        return results[0] if single else results

    torch_cls = type(
        name,
        (torch.autograd.Function,),
        {
            "forward": staticmethod(forward),
            "backward": staticmethod(backward),
            "tadiff_function": fn_cls,
            "__module__": fn_cls.__module__,
            "__qualname__": fn_cls.__qualname__,
            "__doc__": fn_cls.__doc__,
        },
    )
    setattr(fn_cls, _CACHE_ATTR, torch_cls)
    return torch_cls


def _device_of(args: tuple[Any, ...]) -> torch.device:
    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


def _as_torch(value: Any, device: torch.device, name: str, where: str, k: int) -> Any:
    """Pass torch tensors and None through; copy NumPy results onto the inputs' device."""
    if value is None or isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        if device.type != "cpu":
            raise AutogradError(
                f"function {name}: {where} returned a NumPy array at position {k} for inputs on "
                f"{device}; compute with xp = tadiff._array.namespace(x) so the result "
                "stays on the device"
            )
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, (int, float, bool)) and where == "forward":
        return value  # torch passes Python scalars through as non-differentiable outputs
    raise AutogradError(
        f"function {name}: {where} returned a {type(value).__name__} at position {k}; expected "
        "a torch tensor (or None)"
    )
