"""The reference interpreter: evaluate index-notation IR by plain loops, one element at a time.

This is the oracle every faster backend is compared against, so it is written to be obviously
correct rather than fast: every output element is computed by walking the expression tree with
the index variables bound to integers, every sum is a Python loop over its exact integer range,
every access is checked against the argument's shape, and every index must be an integer.

Example:
    >>> import numpy as np
    >>> from tadiff.index.parse import parse
    >>> d = parse("y[i] = sum[k=0:3](x[i,k])")
    >>> evaluate(d.out_vars, (2,), d.body, {"x": np.ones((2, 3))}, {}).tolist()
    [3.0, 3.0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from tadiff.errors import BoundsError, InputError
from tadiff.index.expr import Access, Affine, Const, Index, Node, Op, Sum, Where

__all__ = ["evaluate", "evaluate_node", "scalar_op"]


def _sigmoid(x: float) -> float:
    # the two branches keep exp from overflowing for large |x|
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


_FUNCTIONS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "sign": np.sign,
    "sigmoid": lambda x: np.float64(_sigmoid(float(x))) if abs(x) < 700 else np.float64(x > 0),
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def scalar_op(op: str, *values: float) -> float:
    """Apply the elementary operation ``op`` to floats with IEEE semantics (inf/nan, no raise).

    Example:
        >>> scalar_op("maximum", 1.0, 2.0)
        2.0
    """
    with np.errstate(all="ignore"):
        return float(_FUNCTIONS[op](*(np.float64(v) for v in values)))


def _value(expr: Affine, env: Mapping[str, int]) -> Fraction | int:
    total: Fraction | int = expr.const
    for name, coeff in expr.items():
        try:
            total += coeff * env[name]
        except KeyError:
            raise InputError(f"index expression {expr} uses {name!r}, which has no value") from None
    return total


def _lower(bounds: tuple[Affine, ...], env: Mapping[str, int]) -> int:
    return max(math.ceil(_value(b, env)) for b in bounds)


def _upper(bounds: tuple[Affine, ...], env: Mapping[str, int]) -> int:
    return min(math.floor(_value(b, env)) for b in bounds)


def evaluate_node(node: Node, env: dict[str, int], arrays: Mapping[str, np.ndarray]) -> float:
    """The value of ``node`` with index variables and size parameters bound by ``env``.

    Raises:
        BoundsError: an access outside its argument's shape, or at a non-integer index.
    """
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Index):
        return float(_value(node.expr, env))
    if isinstance(node, Access):
        array = arrays[node.name]
        where = []
        for dim, expr in enumerate(node.indices):
            value = _value(expr, env)
            if getattr(value, "denominator", 1) != 1 or not 0 <= value < array.shape[dim]:
                point = ", ".join(f"{k}={v}" for k, v in env.items() if "." not in k)
                raise BoundsError(
                    f"{node.name}[{', '.join(map(str, node.indices))}]: index {expr} = {value} "
                    f"is outside 0..{array.shape[dim] - 1} of dimension {dim} at {point}"
                )
            where.append(int(value))
        return float(array[tuple(where)])
    if isinstance(node, Op):
        return scalar_op(node.op, *(evaluate_node(a, env, arrays) for a in node.args))
    if isinstance(node, Where):
        if all(c.holds(env) for c in node.conds):
            return evaluate_node(node.then, env, arrays)
        return evaluate_node(node.other, env, arrays)
    if isinstance(node, Sum):
        if not node.lower or not node.upper:
            raise InputError(
                f"sum over {node.var!r} has no range: give it explicitly or build the function "
                "with define(), which infers it from the shapes"
            )
        outer = env.get(node.var)
        total = 0.0
        for value in range(_lower(node.lower, env), _upper(node.upper, env) + 1):
            env[node.var] = value
            total += evaluate_node(node.body, env, arrays)
        if outer is None:
            env.pop(node.var, None)
        else:
            env[node.var] = outer
        return total
    raise TypeError(f"not an index-notation node: {node!r}")  # pragma: no cover


def evaluate(
    out_vars: tuple[str, ...],
    out_shape: tuple[int, ...],
    body: Node,
    arrays: Mapping[str, np.ndarray],
    params: Mapping[str, int],
) -> np.ndarray:
    """Evaluate ``out[out_vars] = body`` for every element of an output of shape ``out_shape``.

    Args:
        out_vars: the output index variables, one per output dimension.
        out_shape: the output shape (each variable runs over ``0 .. size-1``).
        body: the scalar expression.
        arrays: argument name -> NumPy array.
        params: size parameter name (``x.shape[0]``) -> value.

    Returns:
        float64 array of shape ``out_shape``.
    """
    out = np.zeros(out_shape, dtype=np.float64)
    env: dict[str, int] = dict(params)
    for point in np.ndindex(*out_shape):
        env.update(zip(out_vars, (int(p) for p in point), strict=True))
        out[point] = evaluate_node(body, env, arrays)
    return out
