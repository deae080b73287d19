"""Activation modules: thin wrappers of the functions in ``tadiff.nn.functional``."""

from __future__ import annotations

from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError
from tadiff.nn import functional as F
from tadiff.nn.activation_functions import _no_inplace
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


class _Elementwise(Module):
    """An activation module with no parameters: ``forward`` applies ``_function`` with the
    hyperparameters named in ``_options`` (shown by ``repr``)."""

    _options: tuple[str, ...] = ()

    def _function(self, x: Tensor, **options) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        return self._function(x, **{name: getattr(self, name) for name in self._options})

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)}" for name in self._options)


class LeakyReLU(_Elementwise):
    """``x`` for ``x > 0``, else ``negative_slope * x`` (see ``F.leaky_relu``).

    Example:
        >>> import tadiff as td
        >>> LeakyReLU(0.1)(td.tensor([-1.0, 2.0]))
        tensor([-0.1,  2. ])
    """

    _options = ("negative_slope",)
    _function = staticmethod(F.leaky_relu)

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "LeakyReLU")
        self.negative_slope = negative_slope


class ELU(_Elementwise):
    """``x`` for ``x > 0``, else ``alpha (exp(x) - 1)`` (see ``F.elu``)."""

    _options = ("alpha",)
    _function = staticmethod(F.elu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "ELU")
        self.alpha = alpha


class SELU(_Elementwise):
    """Scaled ELU with the self-normalizing constants (see ``F.selu``)."""

    _function = staticmethod(F.selu)

    def __init__(self, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "SELU")


class CELU(_Elementwise):
    """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))`` (see ``F.celu``)."""

    _options = ("alpha",)
    _function = staticmethod(F.celu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "CELU")
        if alpha == 0:
            raise InputError("CELU: alpha=0 divides by zero; expected a nonzero alpha")
        self.alpha = alpha


class SiLU(_Elementwise):
    """``x * sigmoid(x)`` (see ``F.silu``)."""

    _function = staticmethod(F.silu)

    def __init__(self, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "SiLU")


class Mish(_Elementwise):
    """``x * tanh(softplus(x))`` (see ``F.mish``)."""

    _function = staticmethod(F.mish)

    def __init__(self, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "Mish")


class Softplus(_Elementwise):
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold`` (see ``F.softplus``)."""

    _options = ("beta", "threshold")
    _function = staticmethod(F.softplus)

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        if beta == 0:
            raise InputError("Softplus: beta=0 divides by zero; expected a nonzero beta")
        self.beta, self.threshold = beta, threshold


class Hardtanh(_Elementwise):
    """``x`` clipped to ``[min_val, max_val]`` (see ``F.hardtanh``)."""

    _options = ("min_val", "max_val")
    _function = staticmethod(F.hardtanh)

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "Hardtanh")
        if max_val < min_val:
            raise InputError(
                f"Hardtanh: max_val={max_val} is below min_val={min_val}; expected "
                "min_val <= max_val"
            )
        self.min_val, self.max_val = min_val, max_val


class ReLU6(_Elementwise):
    """``min(max(x, 0), 6)`` (see ``F.relu6``)."""

    _function = staticmethod(F.relu6)

    def __init__(self, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "ReLU6")


class Softsign(_Elementwise):
    """``x / (1 + |x|)`` (see ``F.softsign``)."""

    _function = staticmethod(F.softsign)


class Threshold(_Elementwise):
    """``x`` where ``x > threshold``, else ``value`` (see ``F.threshold``).

    Example:
        >>> import tadiff as td
        >>> Threshold(1.0, 0.0)(td.tensor([0.5, 2.0]))
        tensor([0., 2.])
    """

    _options = ("threshold", "value")
    _function = staticmethod(F.threshold)

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "Threshold")
        self.threshold, self.value = threshold, value


class Hardshrink(_Elementwise):
    """``0`` on ``[-lambd, lambd]``, else ``x`` (see ``F.hardshrink``)."""

    _options = ("lambd",)
    _function = staticmethod(F.hardshrink)

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd


class Softshrink(_Elementwise):
    """``x`` moved ``lambd`` towards 0, ``0`` on ``[-lambd, lambd]`` (see ``F.softshrink``)."""

    _options = ("lambd",)
    _function = staticmethod(F.softshrink)

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd


class Tanhshrink(_Elementwise):
    """``x - tanh(x)`` (see ``F.tanhshrink``)."""

    _function = staticmethod(F.tanhshrink)


class Hardswish(_Elementwise):
    """``x * relu6(x + 3) / 6`` (see ``F.hardswish``)."""

    _function = staticmethod(F.hardswish)

    def __init__(self, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "Hardswish")


class Hardsigmoid(_Elementwise):
    """``relu6(x + 3) / 6`` (see ``F.hardsigmoid``)."""

    _function = staticmethod(F.hardsigmoid)

    def __init__(self, inplace: bool = False):
        super().__init__()
        _no_inplace(inplace, "Hardsigmoid")


class LogSigmoid(_Elementwise):
    """``log(sigmoid(x))``, stable for large ``|x|`` (see ``F.logsigmoid``)."""

    _function = staticmethod(F.logsigmoid)


class GLU(_Elementwise):
    """Gated linear unit along ``dim``: halves ``a, b``; ``a * sigmoid(b)`` (see ``F.glu``)."""

    _options = ("dim",)
    _function = staticmethod(F.glu)

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim


class Softmin(Module):
    """Softmin along ``dim`` (see ``F.softmin``)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmin(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
