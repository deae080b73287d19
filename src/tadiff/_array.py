"""The array namespace of a value: write array code once for NumPy, torch and tadiff Tensors.

Kernels that must run both in tadiff's engine (NumPy arrays) and inside ``torch.autograd`` (torch
tensors, CPU or CUDA) are written against ``xp = namespace(x)`` and use the subset NumPy and torch
share (``@``, ``exp``, ``einsum``, ``sum``, indexing, ...).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np


def namespace(*values: object) -> ModuleType:
    """Return the array module that operates on ``values``: ``numpy``, ``torch`` or ``tadiff``.

    The first value that is not a plain NumPy array or Python scalar decides. torch is imported
    only when a torch tensor is actually passed, so NumPy-only users never pay for it. An object
    can name its own namespace through ``__tadiff_namespace__`` (tadiff Tensors do).

    Example:
        >>> namespace(np.ones(3)).__name__
        'numpy'
    """
    for value in values:
        own = getattr(type(value), "__tadiff_namespace__", None)
        if own is not None:
            return own()
        if type(value).__module__.startswith("torch"):
            import torch  # deferred: torch is an optional extra

            return torch
    return np
