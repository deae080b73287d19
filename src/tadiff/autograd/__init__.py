"""tadiff's autograd engine: PyTorch's define-by-run semantics over NumPy arrays.

- ``tensor``: :class:`Tensor` (data, grad, grad_fn, hooks, ``backward``).
- ``graph``: backward nodes (``next_functions``, ``AccumulateGrad``) and saved tensors.
- ``engine``: the dependency-counted reverse pass, :func:`backward`, :func:`grad`.
- ``function``: custom :class:`Function` with ``ctx``; :func:`once_differentiable`.
- ``grad_mode``, ``anomaly``, ``gradcheck``, ``functional``.

The primitive ops and their gradient formulas are in ``tadiff.ops``.
"""

from tadiff.autograd import functional
from tadiff.autograd.anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from tadiff.autograd.engine import backward, grad
from tadiff.autograd.function import BackwardCFunction, Function, once_differentiable
from tadiff.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from tadiff.autograd.gradcheck import gradcheck, gradgradcheck
from tadiff.autograd.graph import AccumulateGrad, Node
from tadiff.autograd.tensor import Tensor

__all__ = [
    "AccumulateGrad",
    "BackwardCFunction",
    "Function",
    "Node",
    "Tensor",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "inference_mode",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "no_grad",
    "once_differentiable",
    "set_detect_anomaly",
    "set_grad_enabled",
]
