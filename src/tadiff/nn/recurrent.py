"""Recurrent layers with torch's names, parameters and shapes: ``RNN``, ``LSTM``, ``GRU`` and
their one-step cells ``RNNCell``, ``LSTMCell``, ``GRUCell``.

Each layer is a Python loop over time steps of a few tadiff ops; the engine supplies the
gradients (backpropagation through time). As in torch, the input part of every gate is one
matmul over the whole sequence and each step adds one fused matmul ``h @ W_hh^T`` for all
gates at once.

Example:
    >>> import tadiff as td
    >>> lstm = LSTM(input_size=3, hidden_size=5, num_layers=2, batch_first=True)
    >>> out, (h_n, c_n) = lstm(td.randn(4, 7, 3))  # (batch, time, features)
    >>> out.shape, h_n.shape, c_n.shape
    ((4, 7, 5), (2, 4, 5), (2, 4, 5))
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.function import Function
from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import functional as F
from tadiff.nn import init
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.module import Module, Parameter
from tadiff.ops.elementwise import _sigmoid

# gates per mode, in torch's order: LSTM (input, forget, cell, output), GRU (reset, update, new)
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _check_size(value: Any, name: str, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{where}: {name}={value!r}; expected an int >= {minimum}")
    return int(value)


class _LSTMCellFunction(Function):
    """The element-wise part of an LSTM step as one node: ``(gates, c) -> (h, c')`` with
    ``gates = x W_ih^T + b_ih + h W_hh^T + b_hh`` (torch's order i, f, g, o): one node instead of
    a dozen per step. A plain backward reuses the forward's activations (NumPy); under
    ``create_graph`` it recomputes them from the saved inputs with tadiff ops, so second
    derivatives are exact."""

    @staticmethod
    def forward(ctx: Any, gates: Tensor, c: Tensor) -> tuple[np.ndarray, np.ndarray]:
        ctx.save_for_backward(gates, c)
        a = gates.data
        k = a.shape[-1] // 4
        ifo = _sigmoid(np.concatenate([a[..., : 2 * k], a[..., 3 * k :]], -1))
        i, f, o = ifo[..., :k], ifo[..., k : 2 * k], ifo[..., 2 * k :]
        g = np.tanh(a[..., 2 * k : 3 * k])
        c_new = f * c.data + i * g
        tanh_c = np.tanh(c_new)
        ctx.activations = (i, f, g, o, tanh_c)
        return o * tanh_c, c_new

    @staticmethod
    def backward(ctx: Any, grad_h: Tensor, grad_c: Tensor) -> tuple[Any, Any]:
        gates, c = ctx.saved_tensors  # also checks that neither was modified in place
        if td.is_grad_enabled():  # create_graph: rebuild the activations as a graph
            i, f, g, o = (
                t.sigmoid() if k != 2 else t.tanh() for k, t in enumerate(gates.chunk(4, -1))
            )
            tanh_c = (f * c + i * g).tanh()
            join = td.cat
        else:
            i, f, g, o, tanh_c = ctx.activations
            grad_h, grad_c, c = grad_h.data, grad_c.data, c.data
            join = np.concatenate
        grad_c = grad_c + grad_h * o * (1 - tanh_c * tanh_c)
        grads = (
            grad_c * g * i * (1 - i),
            grad_c * c * f * (1 - f),
            grad_c * i * (1 - g * g),
            grad_h * tanh_c * o * (1 - o),
        )
        return join(grads, -1), grad_c * f


class _GRUCellFunction(Function):
    """The element-wise part of a GRU step as one node: ``(x_part, h_part, h) -> h'`` with
    ``x_part = x W_ih^T + b_ih``, ``h_part = h W_hh^T + b_hh`` (torch's gate order r, z, n);
    backward as :class:`_LSTMCellFunction`'s (NumPy from the forward's activations, or rebuilt
    as a graph under ``create_graph``)."""

    @staticmethod
    def forward(ctx: Any, x_part: Tensor, h_part: Tensor, h: Tensor) -> np.ndarray:
        ctx.save_for_backward(x_part, h_part, h)
        xr, xz, xn = np.split(x_part.data, 3, axis=-1)
        hr, hz, hn = np.split(h_part.data, 3, axis=-1)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        n = np.tanh(xn + r * hn)
        ctx.activations = (r, z, n, hn)
        return n + z * (h.data - n)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Any, Any, Any]:
        x_part, h_part, h = ctx.saved_tensors  # also checks that none was modified in place
        if td.is_grad_enabled():  # create_graph: rebuild the activations as a graph
            xr, xz, xn = x_part.chunk(3, -1)
            hr, hz, hn = h_part.chunk(3, -1)
            r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
            n = (xn + r * hn).tanh()
            join = td.cat
        else:
            r, z, n, hn = ctx.activations
            grad, h = grad.data, h.data
            join = np.concatenate
        pre_n = grad * (1 - z) * (1 - n * n)
        pre_r = pre_n * hn * r * (1 - r)
        pre_z = grad * (h - n) * z * (1 - z)
        return join((pre_r, pre_z, pre_n), -1), join((pre_r, pre_z, pre_n * r), -1), grad * z


def _step(
    mode: str,
    x_part: Tensor,
    h: Tensor,
    c: Tensor | None,
    w_hh: Tensor,
    b_hh: Any,
    w_hr: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """One time step: ``x_part`` is ``x @ W_ih^T + b_ih`` (all gates); returns ``(h, c)``.
    ``w_hr`` is an LSTM's projection of the new hidden state (``proj_size > 0``)."""
    h_part = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        h, c = _LSTMCellFunction.apply(x_part + h_part, c)
        return (h if w_hr is None else F.linear(h, w_hr)), c
    if mode == "GRU":
        # the reset gate multiplies W_hn h + b_hn, so the hidden part stays separate (torch's GRU)
        return _GRUCellFunction.apply(x_part, h_part, h), None
    pre = x_part + h_part
    return (pre.tanh() if mode == "RNN_TANH" else pre.relu()), None


def _check_input_dtype(x: Tensor, weight: Tensor, where: str) -> None:
    if x.dtype != weight.dtype:
        raise DTypeError(
            f"{where}: input dtype {x.dtype} differs from the parameters' {weight.dtype}; "
            "convert one of them (e.g. module.double() or x.float())"
        )


class _RNNBase(Module):
    """The shared multi-layer, optionally bidirectional loop of ``RNN``, ``LSTM`` and ``GRU``."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        where = type(self).__name__
        dtype = factory_dtype(dtype, device, where)
        self.mode = mode
        self.input_size = _check_size(input_size, "input_size", where)
        self.hidden_size = _check_size(hidden_size, "hidden_size", where)
        self.num_layers = _check_size(num_layers, "num_layers", where)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise InputError(f"{where}: dropout={dropout!r}; expected a number in [0, 1]")
        if not 0.0 <= dropout <= 1.0:
            raise InputError(f"{where}: dropout={dropout}; expected a probability in [0, 1]")
        proj_size = _check_size(proj_size, "proj_size", where, minimum=0)
        if proj_size >= self.hidden_size:
            raise InputError(
                f"{where}: proj_size={proj_size}; expected less than hidden_size="
                f"{self.hidden_size} (or 0 for no projection)"
            )
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        gates = _GATES[mode] * self.hidden_size
        out = self._out_size()
        # registration order and names are torch's, so state dicts load both ways
        for layer in range(self.num_layers):
            layer_in = self.input_size if layer == 0 else out * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = {"weight_ih": (gates, layer_in), "weight_hh": (gates, out)}
                if self.bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                if self.proj_size:
                    shapes["weight_hr"] = (self.proj_size, self.hidden_size)
                for name, shape in shapes.items():
                    setattr(self, name + suffix, Parameter(np.empty(shape, dtype=dtype)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every weight and bias from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _out_size(self) -> int:
        """Features of the hidden state ``h`` (the projection's when ``proj_size > 0``)."""
        return self.proj_size or self.hidden_size

    def _layer_params(self, layer: int, direction: int) -> tuple[Any, ...]:
        """``(w_ih, w_hh, b_ih, b_hh, w_hr)`` of one layer and direction (None where absent)."""
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
        present = (True, True, self.bias, self.bias, bool(self.proj_size))
        return tuple(
            getattr(self, n + suffix) if p else None for n, p in zip(names, present, strict=True)
        )

    def _check_state(self, state: Any, name: str, expected: tuple[int, ...], dtype: Any) -> Tensor:
        where = type(self).__name__
        state = as_tensor_arg(state, f"{where} {name}")
        if state.shape != expected:
            raise ShapeError(
                f"{where}: {name} of shape {state.shape}; expected {expected} "
                "(num_layers * num_directions, batch, features), without batch for an "
                "unbatched input"
            )
        if state.dtype != dtype:
            raise DTypeError(
                f"{where}: {name} dtype {state.dtype}; expected {dtype} like the input"
            )
        return state

    def _run(self, input: Any, hx: Any) -> tuple[Tensor, Tensor, Tensor | None]:
        where = type(self).__name__
        x = as_tensor_arg(input, f"{where} input")
        if x.ndim not in (2, 3):
            raise ShapeError(
                f"{where}: input of shape {x.shape}; expected 3 dims (time, batch, features) "
                "(batch first with batch_first=True) or 2 dims (time, features) unbatched"
            )
        if x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{where}: input of shape {x.shape} has {x.shape[-1]} features in its last dim; "
                f"expected input_size={self.input_size}"
            )
        first = self._layer_params(0, 0)[0]
        _check_input_dtype(x, first, where)
        given_shape, batched = x.shape, x.ndim == 3
        if not batched:
            x = x.unsqueeze(1)
        elif self.batch_first:
            x = x.swapaxes(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0:
            raise ShapeError(f"{where}: input of shape {given_shape} has no time steps")
        directions = 2 if self.bidirectional else 1
        lead = (self.num_layers * directions, batch) if batched else (self.num_layers * directions,)
        h_size, c_size = self._out_size(), self.hidden_size
        h0 = c0 = None
        if hx is not None:
            if self.mode == "LSTM":
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise InputError(f"{where}: hx must be a pair (h_0, c_0), got {type(hx)}")
                h0 = self._check_state(hx[0], "h_0", (*lead, h_size), x.dtype)
                c0 = self._check_state(hx[1], "c_0", (*lead, c_size), x.dtype)
            else:
                h0 = self._check_state(hx, "h_0", (*lead, h_size), x.dtype)
            if not batched:
                h0 = h0.unsqueeze(1)
                c0 = None if c0 is None else c0.unsqueeze(1)
        zeros_h = td.zeros(batch, h_size, dtype=x.dtype)
        zeros_c = td.zeros(batch, c_size, dtype=x.dtype)
        finals_h, finals_c = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                h = zeros_h if h0 is None else h0[index]
                c = None if self.mode != "LSTM" else (zeros_c if c0 is None else c0[index])
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_params(layer, direction)
                x_parts = F.linear(layer_input, w_ih, b_ih).unbind(0)
                order = range(steps - 1, -1, -1) if direction else range(steps)
                hs: list[Tensor] = [zeros_h] * steps
                for t in order:
                    h, c = _step(self.mode, x_parts[t], h, c, w_hh, b_hh, w_hr)
                    hs[t] = h
                outputs.append(td.stack(hs, 0))
                finals_h.append(h)
                finals_c.append(c)
            layer_input = outputs[0] if directions == 1 else td.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, training=True)
        output, h_n = layer_input, td.stack(finals_h, 0)
        c_n = td.stack(finals_c, 0) if self.mode == "LSTM" else None
        if not batched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = None if c_n is None else c_n.squeeze(1)
        elif self.batch_first:
            output = output.swapaxes(0, 1)
        return output, h_n, c_n

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        for name, default in (("bias", True), ("batch_first", False), ("bidirectional", False)):
            if getattr(self, name) != default:
                text += f", {name}={getattr(self, name)}"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.proj_size:
            text += f", proj_size={self.proj_size}"
        return text


class RNN(_RNNBase):
    """Elman recurrent network: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``.

    Args:
        input_size: features of each input step.
        hidden_size: features of the hidden state.
        num_layers: stacked layers (each reads the previous one's output sequence).
        nonlinearity: ``"tanh"`` or ``"relu"``.
        bias: learn ``bias_ih_l{k}`` and ``bias_hh_l{k}``.
        batch_first: input and output are ``(batch, time, features)``.
        dropout: dropout on each layer's output except the last, in training mode.
        bidirectional: a second pass runs backwards in time (``*_reverse`` parameters);
            outputs are concatenated along features.
        dtype: parameter dtype.

    Parameters (``D`` = 2 when bidirectional, else 1): ``weight_ih_l{k}`` of shape
    ``(hidden, input_size)`` for ``k = 0`` and ``(hidden, D * hidden)`` after,
    ``weight_hh_l{k}`` ``(hidden, hidden)``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` ``(hidden,)``,
    all from ``U(-1/sqrt(hidden), 1/sqrt(hidden))`` as torch.

    Forward ``(input, hx=None)``:
        input ``(L, N, input_size)`` (``(N, L, input_size)`` with batch_first) or unbatched
        ``(L, input_size)``; ``hx`` ``(D * num_layers, N, hidden)`` (``(D * num_layers,
        hidden)`` unbatched), zeros by default.

    Returns:
        ``(output, h_n)``: output ``(L, N, D * hidden)`` (batch first / unbatched as the
        input) and the last hidden state of every layer and direction, shaped like ``hx``.

    Example:
        >>> import tadiff as td
        >>> out, h_n = RNN(3, 4, num_layers=2, bidirectional=True)(td.randn(6, 2, 3))
        >>> out.shape, h_n.shape
        ((6, 2, 8), (4, 2, 4))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = None,
        device: Any = None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise InputError(f"RNN: nonlinearity={nonlinearity!r}; expected 'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        super().__init__(
            "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
            num_layers, bias, batch_first, dropout, bidirectional, dtype=dtype, device=device,
        )  # fmt: skip

    def forward(self, input: Any, hx: Any = None) -> tuple[Tensor, Tensor]:
        output, h_n, _ = self._run(input, hx)
        return output, h_n


class LSTM(_RNNBase):
    """Long short-term memory, torch's gates ``i, f, g, o`` (in that order in the weights)::

        i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (x_t W_ih^T + b_ih + h W_hh^T + b_hh)
        c_t = f * c_{t-1} + i * g
        h_t = o * tanh(c_t)

    Args and parameters as ``RNN`` (no ``nonlinearity``), with ``4 * hidden`` gate rows.
    ``proj_size > 0`` (less than ``hidden_size``) adds ``weight_hr_l{k}`` of shape
    ``(proj_size, hidden)`` and makes ``h_t = (o * tanh(c_t)) W_hr^T``: ``h`` (hence the
    output, ``h_0``/``h_n`` and ``weight_hh``'s columns) has ``proj_size`` features, ``c``
    keeps ``hidden``.

    Forward ``(input, hx=None)`` with ``hx = (h_0, c_0)``, each shaped like ``RNN``'s ``h_0``.

    Returns:
        ``(output, (h_n, c_n))``.

    Example:
        >>> import tadiff as td
        >>> out, (h, c) = LSTM(3, 4)(td.randn(5, 3))  # unbatched
        >>> out.shape, h.shape
        ((5, 4), (1, 4))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__(
            "LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
            bidirectional, proj_size, dtype, device,
        )  # fmt: skip

    def forward(self, input: Any, hx: Any = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        output, h_n, c_n = self._run(input, hx)
        return output, (h_n, c_n)


class GRU(_RNNBase):
    """Gated recurrent unit, torch's gates ``r, z, n`` (in that order in the weights)::

        r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr)
        z = sigmoid(x W_iz^T + b_iz + h W_hz^T + b_hz)
        n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))
        h_t = (1 - z) * n + z * h_{t-1}

    Args, parameters (``3 * hidden`` gate rows), forward and returns as ``RNN``.

    Example:
        >>> import tadiff as td
        >>> out, h_n = GRU(3, 4, batch_first=True)(td.randn(2, 5, 3))
        >>> out.shape, h_n.shape
        ((2, 5, 4), (1, 2, 4))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__(
            "GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
            bidirectional, dtype=dtype, device=device,
        )  # fmt: skip

    def forward(self, input: Any, hx: Any = None) -> tuple[Tensor, Tensor]:
        output, h_n, _ = self._run(input, hx)
        return output, h_n


class _CellBase(Module):
    """One time step of a recurrent layer: parameters ``weight_ih``, ``weight_hh``,
    ``bias_ih``, ``bias_hh`` (torch's names), drawn like the layers'."""

    def __init__(
        self, mode: str, input_size: int, hidden_size: int, bias: bool, dtype: Any, device: Any
    ):
        super().__init__()
        where = type(self).__name__
        dtype = factory_dtype(dtype, device, where)
        self.mode = mode
        self.input_size = _check_size(input_size, "input_size", where)
        self.hidden_size = _check_size(hidden_size, "hidden_size", where)
        self.bias = bool(bias)
        gates = _GATES[mode] * self.hidden_size
        self.weight_ih = Parameter(np.empty((gates, self.input_size), dtype=dtype))
        self.weight_hh = Parameter(np.empty((gates, self.hidden_size), dtype=dtype))
        if self.bias:
            self.bias_ih = Parameter(np.empty(gates, dtype=dtype))
            self.bias_hh = Parameter(np.empty(gates, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every weight and bias from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _state(self, state: Any, name: str, x: Tensor, batched: bool) -> Tensor:
        where = type(self).__name__
        expected = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        if state is None:
            return td.zeros(*expected, dtype=x.dtype)
        state = as_tensor_arg(state, f"{where} {name}")
        if state.shape != expected:
            raise ShapeError(
                f"{where}: {name} of shape {state.shape}; expected {expected} "
                "((batch, hidden_size), or (hidden_size,) for an unbatched input)"
            )
        if state.dtype != x.dtype:
            raise DTypeError(
                f"{where}: {name} dtype {state.dtype}; expected {x.dtype} like the input"
            )
        return state

    def _cell(self, input: Any, hx: Any, cx: Any = None) -> tuple[Tensor, Tensor | None]:
        where = type(self).__name__
        x = as_tensor_arg(input, f"{where} input")
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{where}: input of shape {x.shape}; expected (batch, {self.input_size}) or "
                f"({self.input_size},) (input_size={self.input_size})"
            )
        _check_input_dtype(x, self.weight_ih, where)
        batched = x.ndim == 2
        h = self._state(hx, "hx", x, batched)
        c = self._state(cx, "cx", x, batched) if self.mode == "LSTM" else None
        x_part = F.linear(x, self.weight_ih, self.bias_ih)
        return _step(self.mode, x_part, h, c, self.weight_hh, self.bias_hh)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """One step of ``RNN``: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``.

    Args:
        input_size, hidden_size, bias, nonlinearity (``"tanh"``/``"relu"``), dtype: as ``RNN``.

    Forward ``(input, hx=None)``: input ``(N, input_size)`` or ``(input_size,)``; hx
    ``(N, hidden)`` or ``(hidden,)``, zeros by default. Returns ``h'`` shaped like ``hx``.

    Example:
        >>> import tadiff as td
        >>> RNNCell(3, 4)(td.randn(2, 3)).shape
        (2, 4)
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        dtype: Any = None,
        device: Any = None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise InputError(f"RNNCell: nonlinearity={nonlinearity!r}; expected 'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(mode, input_size, hidden_size, bias, dtype, device)

    def forward(self, input: Any, hx: Any = None) -> Tensor:
        return self._cell(input, hx)[0]


class LSTMCell(_CellBase):
    """One step of ``LSTM``.

    Forward ``(input, hx=None)`` with ``hx = (h, c)`` (zeros by default); returns ``(h', c')``.

    Example:
        >>> import tadiff as td
        >>> h, c = LSTMCell(3, 4)(td.randn(2, 3))
        >>> h.shape, c.shape
        ((2, 4), (2, 4))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__("LSTM", input_size, hidden_size, bias, dtype, device)

    def forward(self, input: Any, hx: Any = None) -> tuple[Tensor, Tensor]:
        if hx is None:
            return self._cell(input, None, None)
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise InputError(f"LSTMCell: hx must be a pair (h, c), got {type(hx).__name__}")
        return self._cell(input, hx[0], hx[1])


class GRUCell(_CellBase):
    """One step of ``GRU``; forward ``(input, hx=None)`` returns ``h'``.

    Example:
        >>> import tadiff as td
        >>> GRUCell(3, 4)(td.randn(3)).shape
        (4,)
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__("GRU", input_size, hidden_size, bias, dtype, device)

    def forward(self, input: Any, hx: Any = None) -> Tensor:
        return self._cell(input, hx)[0]


__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNCell"]
