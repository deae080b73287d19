"""Activation modules: thin wrappers of the functions in ``tadiff.nn.functional``."""

from __future__ import annotations

from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError
from tadiff.nn import functional as F
from tadiff.nn.module import Module


class ReLU(Module):
    """``max(x, 0)`` element-wise.

    Example:
        >>> import tadiff as td
        >>> ReLU()(td.tensor([-1.0, 2.0]))
        tensor([0., 2.])
    """

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class Tanh(Module):
    """Hyperbolic tangent element-wise."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    """Logistic function ``1 / (1 + exp(-x))`` element-wise."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class GELU(Module):
    """Gaussian error linear unit; ``approximate="tanh"`` for the tanh form (see ``F.gelu``)."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise InputError(f"GELU: approximate={approximate!r}; expected 'none' or 'tanh'")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """Softmax along ``dim``."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim``."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
