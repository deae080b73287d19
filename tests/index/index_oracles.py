"""Independent oracles for index-notation derivatives (used by the tests only).

* :func:`central_vjp`: central differences of ``sum(g * f(args))`` in float64.
* :func:`scatter_vjp`: the brute-force scatter form — loop over every output element, walk its
  scalar expression with concrete indices, and accumulate the exact local derivative into the
  argument element it reads. It shares nothing with the derivation (no integer solve, no
  Fourier–Motzkin, its own table of derivatives), only the reference interpreter for values.
"""

from __future__ import annotations

import math

import numpy as np

from tadiff.index.expr import Access, Const, Index, Node, Op, Sum, Where
from tadiff.index.interpret import _lower, _upper, evaluate_node


def central_vjp(f, arrays: dict, wrt: str, g: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d/d arrays[wrt] of sum(g * f(**arrays)) by central differences, in float64 (a
    TensorFunction is evaluated by its reference interpreter, any other callable as it is)."""
    f = getattr(f, "reference", f)
    x = np.array(arrays[wrt], dtype=np.float64)
    out = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        keep = x[idx]
        x[idx] = keep + eps
        plus = np.sum(g * f(**{**arrays, wrt: x}))
        x[idx] = keep - eps
        minus = np.sum(g * f(**{**arrays, wrt: x}))
        x[idx] = keep
        out[idx] = (plus - minus) / (2 * eps)
    return out


def _local(op: str, v: list[float], value: float) -> list[float]:
    a = v[0]
    b = v[1] if len(v) > 1 else None
    sgn = lambda t: (t > 0) - (t < 0)  # noqa: E731
    table = {
        "add": lambda: [1.0, 1.0],
        "sub": lambda: [1.0, -1.0],
        "mul": lambda: [b, a],
        "div": lambda: [1.0 / b, -a / (b * b)],
        "pow": lambda: [
            b * a ** (b - 1) if a != 0 or b >= 1 else 0.0,
            value * math.log(a) if a > 0 else 0.0,
        ],
        "neg": lambda: [-1.0],
        "exp": lambda: [math.exp(a)],
        "log": lambda: [1.0 / a],
        "sin": lambda: [math.cos(a)],
        "cos": lambda: [-math.sin(a)],
        "tan": lambda: [1.0 / math.cos(a) ** 2],
        "tanh": lambda: [1.0 - math.tanh(a) ** 2],
        "sqrt": lambda: [0.5 / math.sqrt(a)],
        "abs": lambda: [float(sgn(a))],
        "sign": lambda: [0.0],
        "sigmoid": lambda: [value * (1.0 - value)],
        "maximum": lambda: [1.0, 0.0] if a > b else [0.0, 1.0] if a < b else [0.5, 0.5],
        "minimum": lambda: [1.0, 0.0] if a < b else [0.0, 1.0] if a > b else [0.5, 0.5],
    }
    return table[op]()


def _scatter(node: Node, env: dict, arrays: dict, wrt: str, adj: float, out: np.ndarray) -> None:
    if adj == 0.0 or isinstance(node, Const | Index):
        return
    if isinstance(node, Access):
        if node.name == wrt:
            idx = tuple(int(e.evaluate(env)) for e in node.indices)
            out[idx] += adj
        return
    if isinstance(node, Op):
        values = [evaluate_node(a, env, arrays) for a in node.args]
        value = evaluate_node(node, env, arrays)
        for child, partial in zip(node.args, _local(node.op, values, value), strict=True):
            _scatter(child, env, arrays, wrt, adj * partial, out)
        return
    if isinstance(node, Where):
        branch = node.then if all(c.holds(env) for c in node.conds) else node.other
        _scatter(branch, env, arrays, wrt, adj, out)
        return
    if isinstance(node, Sum):
        for value in range(_lower(node.lower, env), _upper(node.upper, env) + 1):
            _scatter(node.body, {**env, node.var: value}, arrays, wrt, adj, out)
        return
    raise TypeError(node)


def scatter_vjp(f, arrays: dict, wrt: str, g: np.ndarray) -> np.ndarray:
    """Brute-force scatter-form vector-Jacobian product of TensorFunction ``f``."""
    values = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}
    arg_shapes = {k: v.shape for k, v in values.items()}
    shape = f.output_shape(**arg_shapes)
    params = f._params(arg_shapes)
    out = np.zeros_like(values[wrt])
    for point in np.ndindex(*shape):
        env = {**params, **dict(zip(f.out_vars, point, strict=True))}
        _scatter(f.body, env, values, wrt, float(g[point]), out)
    return out


def random_args(
    f, shapes: dict, rng: np.random.Generator, low: float = 0.5, high: float = 1.5
) -> dict:
    """Random float64 arguments of the given shapes (away from 0 so log/sqrt/div are safe)."""
    return {name: rng.uniform(low, high, size=shapes[name]) for name in f.args}
