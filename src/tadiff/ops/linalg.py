"""``matmul`` (with batch broadcasting and the 1-D cases of NumPy/torch) and ``einsum``.

Example:
    >>> import tadiff as td
    >>> a, b = td.ones(2, 3), td.ones(3, 4)
    >>> (a @ b).shape, td.einsum("ij,jk->ik", a, b).shape
    ((2, 4), (2, 4))
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from tadiff.errors import InputError, ShapeError
from tadiff.ops import derivatives as d
from tadiff.ops._common import INPUTS, Tensor, _make, _state, as_tensor, record
from tadiff.ops._dual import einsum_array


def _matmul_node(na: int, nb: int) -> type:
    if na == 1 and nb == 1:
        return d.DotBackward0
    if na == 2 and nb == 1:
        return d.MvBackward0
    if na <= 2 and nb <= 2:
        return d.MmBackward0
    return d.BmmBackward0


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product with NumPy's rules: batch dims broadcast, a 1-D operand is a vector.

    Args:
        a: ``(..., n, k)`` or ``(k,)``.
        b: ``(..., k, m)`` or ``(k,)``.

    Returns:
        ``(..., n, m)`` (vector operands drop their dim).
    """
    if type(a) is not Tensor or type(b) is not Tensor:
        a = as_tensor(a, b if isinstance(b, Tensor) else None, "matmul() argument")
        b = as_tensor(b, a, "matmul() argument")
    if a.data.ndim == 0 or b.data.ndim == 0:
        raise ShapeError(
            "both arguments to matmul need to be at least 1D, but they are "
            f"{a.data.ndim}D and {b.data.ndim}D"
        )
    try:
        out = a.data @ b.data
    except ValueError:
        raise ShapeError(
            f"matmul: shapes cannot be multiplied ({a.data.shape} and {b.data.shape}): the last "
            "dim of the first must equal the second-to-last (or only) dim of the second, and "
            "batch dims must broadcast"
        ) from None
    if (a._rg or b._rg) and _state.enabled:
        return record(_matmul_node(a.data.ndim, b.data.ndim), out, (a, b), INPUTS)
    return _make(out)


def _parse(equation: str, ndims: list[int]) -> tuple[list[str], str]:
    """Explicit-letter form of an einsum equation: ``...`` expanded, output made explicit."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ndims):
        raise InputError(
            f"einsum(): equation '{equation}' names {len(specs)} operands but {len(ndims)} "
            "were given"
        )
    used = set(eq) - set(".,->")
    for ch in used:
        if ch not in string.ascii_letters:
            raise InputError(f"einsum(): invalid subscript '{ch}' in equation '{equation}'")
    spare = [c for c in string.ascii_letters[::-1] if c not in used]
    n_ell = max(
        [nd - (len(s) - 3) for s, nd in zip(specs, ndims, strict=False) if "..." in s] or [0]
    )
    ell = "".join(spare[:n_ell][::-1])
    out_specs = []
    for k, (s, nd) in enumerate(zip(specs, ndims, strict=False)):
        if "..." in s:
            k_ell = nd - (len(s) - 3)
            s = s.replace("...", ell[len(ell) - k_ell :] if k_ell else "")
        if len(s) != nd:
            raise ShapeError(
                f"einsum(): the subscript '{specs[k]}' of operand {k} has {len(s)} letters but "
                f"the operand has {nd} dims"
            )
        out_specs.append(s)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(out_specs)
        out = ell + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell)
        )
    for c in out:
        if c not in "".join(out_specs):
            raise InputError(f"einsum(): output subscript '{c}' does not appear in the inputs")
    return out_specs, out


def _plan(specs: list[str], out: str, operands: list[Tensor]) -> tuple[Any, ...]:
    """For each operand: an einsum of the output gradient and the other operands giving its
    gradient. Repeated letters (diagonals) are written with identity matrices, letters summed only
    inside this operand with a vector of ones, so one einsum covers every case."""
    sizes: dict[str, int] = {}
    for s, t in zip(specs, operands, strict=False):
        for c, n in zip(s, t.data.shape, strict=False):
            sizes[c] = max(sizes.get(c, 1), n)
    all_used = set("".join(specs)) | set(out)
    fresh = iter(c for c in string.ascii_letters if c not in all_used)
    plans = []
    for i, (s, t) in enumerate(zip(specs, operands, strict=False)):
        others = [j for j in range(len(specs)) if j != i]
        available = set(out) | set("".join(specs[j] for j in others))
        target, const_specs, constants = [], [], []
        seen: set[str] = set()
        for c in s:
            if c in seen:  # a diagonal: give it a new letter tied to c by an identity matrix
                new = next(fresh)
                const_specs.append(c + new)
                constants.append(np.eye(sizes[c], dtype=t.data.dtype))
                target.append(new)
                continue
            seen.add(c)
            if c not in available:
                const_specs.append(c)
                constants.append(np.ones(sizes[c], dtype=t.data.dtype))
                available.add(c)
            target.append(c)
        spec = ",".join([out, *[specs[j] for j in others], *const_specs]) + "->" + "".join(target)
        plans.append((spec, tuple(others), tuple(constants), t.data.shape))
    return tuple(plans)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation (NumPy's subscripts: letters, ``...``, implicit output).

    Example:
        >>> import tadiff as td
        >>> td.einsum("ii->", td.eye(3)).item()
        3.0
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ts = [as_tensor(t, name="einsum() operand") for t in operands]
    specs, out_spec = _parse(equation, [t.data.ndim for t in ts])
    explicit = ",".join(specs) + "->" + out_spec
    try:
        data = einsum_array(explicit, *[t.data for t in ts])
    except ValueError as exc:
        shapes = [t.data.shape for t in ts]
        raise ShapeError(f"einsum('{equation}') with operand shapes {shapes}: {exc}") from None
    data = np.asarray(data)
    if _state.enabled and any(t._rg for t in ts):
        plan = _plan(specs, out_spec, ts)
        return record(d.EinsumBackward0, data, tuple(ts), tuple(ts), (plan,))
    return _make(data)
