"""``gradcheck``/``gradgradcheck``: compare the engine's derivatives with central differences.

The numerical derivative of output ``j`` with respect to element ``k`` of input ``i`` is
``(f(x + eps e_k) - f(x - eps e_k)) / (2 eps)``; the analytical one comes from one
``autograd.grad`` call per output element (the rows of the Jacobian). Both must agree within
``atol + rtol * |numerical|``. Use float64 inputs: with eps = 1e-6 the truncation error is ~1e-12
and the rounding error ~1e-10, far below the tolerances.

``fast_mode=True`` checks random projections instead of whole Jacobians: for random ``u`` (input
space) and ``v`` (output space) it compares ``vᵀ J u`` from one VJP and one directional
difference, per input/output pair — cheap for large inputs, and a wrong Jacobian passes only on a
measure-zero set of directions.

``gradgradcheck`` runs ``gradcheck`` on the map ``(inputs, v) -> vᵀ J`` computed with
``create_graph=True``, i.e. it checks second derivatives (and the backward of the backward).

Example:
    >>> import tadiff as td
    >>> x = td.tensor([0.3, -1.2], dtype="float64", requires_grad=True)
    >>> gradcheck(lambda t: (t * t).sin(), (x,)) and gradgradcheck(lambda t: t.exp(), (x,))
    True
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff.autograd.engine import grad
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import GradcheckError, InputError


def _as_tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _diff_inputs(inputs: tuple[Any, ...]) -> list[int]:
    picked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not picked:
        raise InputError("gradcheck expects at least one input Tensor with requires_grad=True")
    for i in picked:
        if inputs[i].dtype != np.float64:
            warnings.warn(
                f"gradcheck: input {i} has dtype {inputs[i].dtype}; use float64 for a "
                "meaningful comparison",
                stacklevel=3,
            )
    return picked


def _outputs(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> tuple[Tensor, ...]:
    outs = _as_tuple(fn(*inputs))
    for j, o in enumerate(outs):
        if not isinstance(o, Tensor):
            raise InputError(f"gradcheck: output {j} of the function is not a Tensor")
    return tuple(o for o in outs if o.dtype.kind in "fc")


def _eval(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> list[np.ndarray]:
    # grad mode stays on: the function may itself differentiate (gradgradcheck)
    return [o.data.astype(np.float64, copy=True) for o in _outputs(fn, inputs)]


def _numerical_jacobians(
    fn: Callable[..., Any], inputs: tuple[Any, ...], i: int, eps: float, sizes: list[int]
) -> list[np.ndarray]:
    """Central-difference Jacobians of every output with respect to input ``i``."""
    x = inputs[i].data
    cols: list[list[np.ndarray]] = [[] for _ in sizes]
    # the input is perturbed in place and restored, one element at a time in row-major order
    # (the order of the analytical rows); indexing x itself, since a flattened view of a
    # column-major or sliced array would be a copy that the function never sees
    for index in np.ndindex(x.shape):
        orig = x[index].copy()
        x[index] = orig + eps
        plus = _eval(fn, inputs)
        x[index] = orig - eps
        minus = _eval(fn, inputs)
        x[index] = orig
        for j, (p, m) in enumerate(zip(plus, minus, strict=False)):
            cols[j].append(((p - m) / (2 * eps)).reshape(-1))
    return [
        np.stack(c, axis=1) if c else np.zeros((n, x.size))
        for c, n in zip(cols, sizes, strict=False)
    ]


def _analytical_rows(
    outputs: tuple[Tensor, ...], inputs: tuple[Any, ...], picked: list[int], j: int
) -> list[np.ndarray]:
    """Rows of d(output j)/d(input i) for every picked input, one backward per output element."""
    out = outputs[j]
    n_out = out.data.size
    jac = [np.zeros((n_out, inputs[i].data.size)) for i in picked]
    if not out.requires_grad:
        return jac
    for m in range(n_out):
        v = np.zeros(out.data.size, out.data.dtype)
        v[m] = 1
        grads = grad(
            out, [inputs[i] for i in picked], _make(v.reshape(out.shape)),
            retain_graph=True, allow_unused=True,
        )  # fmt: skip
        for r, g in enumerate(grads):
            if g is not None:
                jac[r][m] = g.data.reshape(-1)
    return jac


def _fail(
    what: str, i: int, j: int, a: np.ndarray, n: np.ndarray, atol: float, rtol: float
) -> None:
    excess = np.abs(a - n) - (atol + rtol * np.abs(n))
    worst = np.unravel_index(int(np.argmax(excess)), excess.shape)
    raise GradcheckError(
        f"{what} mismatch for output {j} with respect to input {i}: at (output element, input "
        f"element) {tuple(int(w) for w in worst)} analytical={a[worst]!r} "
        f"numerical={n[worst]!r} (atol={atol}, rtol={rtol}).\nanalytical:\n{a}\nnumerical:\n{n}"
    )


def gradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    fast_mode: bool = False,
    raise_exception: bool = True,
) -> bool:
    """Check the gradients of ``fn`` at ``inputs`` against central differences.

    Args:
        fn: maps the inputs to a Tensor or a tuple of Tensors.
        inputs: a Tensor or a tuple of arguments; Tensors with ``requires_grad`` are checked.
        eps: finite-difference step.
        atol, rtol: tolerance ``|analytical - numerical| <= atol + rtol * |numerical|``.
        fast_mode: compare random projections ``vᵀ J u`` instead of full Jacobians.
        raise_exception: raise on failure (default) instead of returning False.

    Returns:
        True when every derivative agrees.

    Raises:
        GradcheckError: naming the input, output and worst element, with both values.
    """
    inputs = _as_tuple(inputs)
    picked = _diff_inputs(inputs)
    try:
        outputs = _outputs(fn, inputs)
        if fast_mode:
            _check_fast(fn, inputs, outputs, picked, eps, atol, rtol)
        else:
            _check_full(fn, inputs, outputs, picked, eps, atol, rtol)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def _check_full(fn, inputs, outputs, picked, eps, atol, rtol) -> None:
    sizes = [o.data.size for o in outputs]
    numerical = {i: _numerical_jacobians(fn, inputs, i, eps, sizes) for i in picked}
    for j in range(len(outputs)):
        analytical = _analytical_rows(outputs, inputs, picked, j)
        for r, i in enumerate(picked):
            a, n = analytical[r], numerical[i][j]
            if not np.all(np.abs(a - n) <= atol + rtol * np.abs(n)):
                _fail("Jacobian", i, j, a, n, atol, rtol)


def _check_fast(fn, inputs, outputs, picked, eps, atol, rtol) -> None:
    rng = np.random.default_rng(0)
    vs = [rng.standard_normal(o.data.shape) for o in outputs]
    for i in picked:
        x = inputs[i].data
        u = rng.standard_normal(x.shape)
        orig = x.copy()
        x[...] = orig + eps * u
        plus = _eval(fn, inputs)
        x[...] = orig - eps * u
        minus = _eval(fn, inputs)
        x[...] = orig
        for j, out in enumerate(outputs):
            numerical = float(np.sum(vs[j] * (plus[j] - minus[j]) / (2 * eps)))
            analytical = 0.0
            if out.requires_grad and out.data.size:
                (g,) = grad(
                    out, inputs[i], _make(vs[j].astype(out.dtype)),
                    retain_graph=True, allow_unused=True,
                )  # fmt: skip
                analytical = 0.0 if g is None else float(np.sum(g.data * u))
            if not abs(analytical - numerical) <= atol + rtol * abs(numerical):
                _fail(
                    "Projection vᵀJu", i, j, np.array([analytical]), np.array([numerical]),
                    atol, rtol,
                )  # fmt: skip


def gradgradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    fast_mode: bool = False,
    raise_exception: bool = True,
) -> bool:
    """Check second derivatives: ``gradcheck`` of ``(inputs, v) -> vᵀ J`` built with
    ``create_graph=True``.

    Args:
        fn, inputs, eps, atol, rtol, fast_mode, raise_exception: as in :func:`gradcheck`.
        grad_outputs: the vectors ``v`` (default: random float64, fixed seed).

    Returns:
        True when every second derivative agrees.
    """
    inputs = _as_tuple(inputs)
    picked = _diff_inputs(inputs)
    outputs = _outputs(fn, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(1)
        grad_outputs = tuple(
            Tensor(rng.standard_normal(o.shape).astype(o.dtype), requires_grad=True)
            for o in outputs
        )
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)

    def first_derivatives(*args: Any) -> tuple[Tensor, ...]:
        xs, vs = args[:n_in], args[n_in:]
        outs = _outputs(fn, xs)
        diff = [(o, v) for o, v in zip(outs, vs, strict=False) if o.requires_grad]
        if not diff:
            return tuple(_make(np.zeros_like(xs[i].data)) for i in picked)
        grads = grad(
            [o for o, _ in diff], [xs[i] for i in picked], [v for _, v in diff],
            create_graph=True, allow_unused=True,
        )  # fmt: skip
        return tuple(
            _make(np.zeros_like(xs[i].data)) if g is None else g
            for g, i in zip(grads, picked, strict=False)
        )

    return gradcheck(
        first_derivatives, (*inputs, *grad_outputs), eps, atol, rtol, fast_mode, raise_exception
    )
