"""``Linear`` (affine map) and ``Identity``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError
from tadiff.nn import functional as F
from tadiff.nn import init
from tadiff.nn.module import Module, Parameter


class Identity(Module):
    """Returns its input unchanged (a placeholder in a Sequential)."""

    def forward(self, x: Tensor) -> Tensor:
        return x


class Linear(Module):
    """``y = x @ weight.T + bias``, initialized like torch's ``nn.Linear``.

    ``weight`` (shape ``(out_features, in_features)``) and ``bias`` (``(out_features,)``) are
    drawn from ``U(-1/sqrt(in_features), 1/sqrt(in_features))``.

    Args:
        in_features: size of each input's last dim.
        out_features: size of each output's last dim.
        bias: whether to add a learned bias.
        dtype: parameter dtype (float32 by default, like torch).

    Shapes:
        input ``(..., in_features)`` -> output ``(..., out_features)``.

    Example:
        >>> import tadiff as td
        >>> Linear(3, 2)(td.ones(5, 3)).shape
        (5, 2)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "Linear")
        for name, size in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(size, int) or size < 0:
                raise InputError(f"Linear: {name}={size!r}; expected a non-negative int")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw fresh weights and bias (torch's default scheme)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )
