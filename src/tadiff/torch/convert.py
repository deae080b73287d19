"""Conversions between tadiff Tensors (or NumPy arrays) and torch tensors.

On CPU both directions share memory whenever the layouts allow (``torch.from_numpy`` and
``Tensor.numpy()``): no copy, and an in-place write through one is seen by the other. A copy is
made, silently, when sharing is impossible: negative strides (``x[::-1]``), a read-only array,
non-native byte order, or a torch tensor off the CPU.

Gradients do not cross: each conversion gives a *leaf* of the other engine, detached from the
graph the value came from. ``requires_grad`` sets whether that new leaf records (default False).
To differentiate through a tadiff computation from torch, run it on torch tensors instead
(:func:`tadiff.torch.function`, or the ops exported by :mod:`tadiff.torch`). Version counters
are not shared either: after an in-place write on a shared buffer, graphs of the *other* engine
that saved it do not notice.

Example:
    >>> import numpy as np
    >>> import tadiff as td
    >>> a = td.tensor(np.arange(3.0))
    >>> t = to_torch(a)
    >>> t[0] = 7.0           # shared memory: visible on the tadiff side
    >>> float(a.data[0])
    7.0
    >>> from_torch(t).data.tolist()
    [7.0, 1.0, 2.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError

__all__ = ["from_torch", "to_torch"]


def to_torch(value: Any, *, requires_grad: bool = False, device: Any = None) -> torch.Tensor:
    """A torch tensor holding the values of a tadiff Tensor or NumPy array.

    Args:
        value: a :class:`tadiff.Tensor` or a ``numpy.ndarray`` (numeric or bool).
        requires_grad: make the result a torch leaf that requires grad (floating dtypes only).
            The tadiff graph of ``value`` is not connected to it.
        device: torch device of the result (default CPU, which shares memory with ``value``
            where possible; another device copies).

    Returns:
        A torch tensor of the same shape and dtype.

    Raises:
        DTypeError: ``value`` is neither a Tensor nor an ndarray, or its dtype has no torch
            equivalent (object, strings, unsigned 16/32/64-bit on older torch).
    """
    if isinstance(value, Tensor):
        arr = value.data
    elif isinstance(value, np.ndarray):
        arr = value
    else:
        raise DTypeError(
            f"to_torch: expected a tadiff Tensor or a numpy.ndarray, got {type(value).__name__}"
        )
    if not _shareable(arr):
        arr = np.array(arr, dtype=arr.dtype.newbyteorder("="), order="C")  # a writable copy
    try:
        out = torch.from_numpy(arr)
    except TypeError as exc:
        raise DTypeError(f"to_torch: dtype {arr.dtype} has no torch equivalent") from exc
    if device is not None:
        out = out.to(device)
    if requires_grad:
        if not (out.is_floating_point() or out.is_complex()):
            raise DTypeError(
                f"to_torch: requires_grad=True needs a floating dtype, got {arr.dtype}"
            )
        out.requires_grad_(True)
    return out


def _shareable(arr: np.ndarray) -> bool:
    """Whether ``torch.from_numpy`` can view ``arr`` without a copy and without a warning."""
    return arr.flags.writeable and arr.dtype.isnative and all(s >= 0 for s in arr.strides)


def from_torch(value: torch.Tensor, *, requires_grad: bool = False) -> Tensor:
    """A tadiff Tensor holding the values of a torch tensor.

    Args:
        value: a torch tensor, any device; ``requires_grad`` and the torch graph are dropped
            (the value is detached). Conjugate and negative views are resolved first (a copy).
        requires_grad: make the result a tadiff leaf that requires grad.

    Returns:
        A tadiff Tensor; on CPU its ``data`` shares memory with ``value``; from another device
        it is a copy.

    Raises:
        DTypeError: ``value`` is not a torch tensor, or its dtype has no NumPy equivalent
            (bfloat16, quantized types): cast first, e.g. ``value.float()``.
    """
    if not isinstance(value, torch.Tensor):
        raise DTypeError(f"from_torch: expected a torch.Tensor, got {type(value).__name__}")
    t = value.detach().resolve_conj().resolve_neg()
    if t.device.type != "cpu":
        t = t.cpu()
    try:
        arr = t.numpy()
    except TypeError as exc:
        raise DTypeError(
            f"from_torch: torch dtype {value.dtype} has no NumPy equivalent; cast it first "
            "(for example value.float())"
        ) from exc
    return Tensor(arr, requires_grad=requires_grad)
