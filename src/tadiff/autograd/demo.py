"""``tadiff demo`` showcase of the autograd engine, with self-checks against closed forms.

Reproduces the classic example ``e = (a * b) * d``: the graph of backward nodes
(``grad_fn``/``next_functions``), gradients accumulating over two ``backward`` calls, ``b.grad``
staying ``None``; the ``unbind`` routing example; and a second derivative through
``create_graph`` compared with its closed form.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tadiff as td
from tadiff.errors import AutogradError


def _describe(node: object) -> str:
    if node is None:
        return "None"
    return type(node).__name__


def run(out: Callable[[str], None]) -> bool:
    """Print the showcase through ``out``; return True when every self-check passed."""
    ok = True

    def check(label: str, got: float, want: float) -> None:
        nonlocal ok
        good = math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12)
        ok &= good
        out(f"  {label:<44} {got:>10.6g}   expected {want:<10.6g} {'ok' if good else 'FAIL'}")

    a = td.tensor(2.0, requires_grad=True)
    b = td.tensor(3.0)
    c = a * b
    d = td.tensor(4.0, requires_grad=True)
    e = c * d
    out("a = 2, b = 3 (no grad), d = 4;  c = a * b;  e = c * d")
    out(f"  e.grad_fn                  = {_describe(e.grad_fn)}")
    pairs = ", ".join(f"({_describe(n)}, {i})" for n, i in e.grad_fn.next_functions)
    out(f"  e.grad_fn.next_functions   = ({pairs})")
    pairs = ", ".join(f"({_describe(n)}, {i})" for n, i in c.grad_fn.next_functions)
    out(f"  c.grad_fn.next_functions   = ({pairs})")
    e.backward(retain_graph=True)
    check("a.grad after backward", a.grad.item(), 12.0)
    check("d.grad after backward", d.grad.item(), 6.0)
    e.backward()
    check("a.grad after a second backward", a.grad.item(), 24.0)
    out(f"  b.grad = {b.grad}  (b does not require grad)")
    ok &= b.grad is None
    try:
        e.backward()
        out("  a third backward without retain_graph: no error  FAIL")
        ok = False
    except AutogradError as exc:
        out(f"  a third backward: AutogradError: {str(exc)[:58]}...")

    xyz = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x, _, z = xyz.unbind()
    prod = x * z
    slots = [i for _, i in prod.grad_fn.next_functions]
    out(f"x, y, z = xyz.unbind(); out = x * z: next_functions slots {slots}")
    prod.backward()
    ok &= slots == [0, 2]
    out(f"  xyz.grad = {xyz.grad.tolist()}  expected [3.0, 0.0, 1.0]")
    ok &= xyz.grad.tolist() == [3.0, 0.0, 1.0]

    t = 0.7
    v = td.tensor(t, dtype="float64", requires_grad=True)
    y = v**3 * v.sin()
    (g1,) = td.autograd.grad(y, v, create_graph=True)
    (g2,) = td.autograd.grad(g1, v)
    s, co = math.sin(t), math.cos(t)
    out("f(x) = x^3 sin x at x = 0.7, derivatives by create_graph=True:")
    check("f'(x)  = 3x^2 sin x + x^3 cos x", g1.item(), 3 * t**2 * s + t**3 * co)
    check(
        "f''(x) = 6x sin x + 6x^2 cos x - x^3 sin x",
        g2.item(),
        6 * t * s + 6 * t**2 * co - t**3 * s,
    )

    w = td.tensor([1.0, 2.0, 3.0], dtype="float64", requires_grad=True)
    buf = w * 1
    buf[1:] *= w[:2]  # an in-place op on a view rewrites the base's graph (CopySlices)
    buf.sum().backward()
    out("buf = w * 1; buf[1:] *= w[:2]  (w = [1, 2, 3]; in place on a view):")
    out(
        f"  buf.grad_fn = {_describe(buf.grad_fn)} over "
        f"{_describe(buf.grad_fn.next_functions[0][0])}"
    )
    ok &= _describe(buf.grad_fn.next_functions[0][0]) == "CopySlices"
    # sum(buf) = w0 + w1 * w0 + w2 * w1: d/dw = [1 + w1, w0 + w2, w1]
    out(f"  w.grad = {w.grad.tolist()}  expected [3.0, 4.0, 2.0]")
    ok &= w.grad.tolist() == [3.0, 4.0, 2.0]

    m = td.tensor([[2.0, 1.0], [1.0, 3.0]], dtype="float64", requires_grad=True)
    td.linalg.slogdet(m).logabsdet.backward()
    out(
        "td.linalg.slogdet(A) for A = [[2, 1], [1, 3]]: d log|det A| / dA = A^-T = [[.6, -.2], ...]"
    )
    check("dA[0, 0]", m.grad.data[0, 0], 0.6)
    check("dA[0, 1]", m.grad.data[0, 1], -0.2)
    hess = td.func.hessian(lambda x: (x**3).sum())(td.tensor([1.0, 2.0], dtype="float64"))
    out("td.func.hessian(lambda x: (x**3).sum()) at [1, 2] = diag(6x):")
    check("H[1, 1]", hess.data[1, 1], 12.0)
    check("H[0, 1]", hess.data[0, 1], 0.0)
    return ok
