"""Showcase for ``tadiff demo``: all integer solutions of ``x0 - 2 x1 - 2 x2 = 3`` in a box.

The derivation meets exactly this problem when an index equation such as ``i = j + 2k + 2l + 3``
must be solved for the summation indices: the solutions are ``x = x_p + K z`` and the box
(tensor shapes) becomes loop bounds on the kernel coordinates z.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from tadiff.intlinalg.affine import Affine
from tadiff.intlinalg.fourier_motzkin import enumerate_points, fourier_motzkin
from tadiff.intlinalg.solve import IntegerSolver

A = [[1, -2, -2]]
B = [3]
SIDE = 8  # the box 0 <= x_i < SIDE


def run(out: Callable[[str], None]) -> bool:
    """Print the solution of the demo system through ``out``; return whether it matches brute force.

    Example:
        >>> run(lambda line: None)
        True
    """
    solver = IntegerSolver(A)
    x_p = solver.solve(B)
    K = solver.kernel
    out(f"A = {A}, b = {B}: integer solutions x = x_p + K z")
    out(f"  rank {solver.rank}, Smith diagonal {solver.smith.diagonal}")
    out(f"  particular solution x_p = {x_p}")
    out(f"  kernel K (columns) = {K}")

    zs = [f"z{k}" for k in range(len(K[0]))]
    x = [
        Affine({z: K[i][k] for k, z in enumerate(zs)}, x_p[i]) for i in range(len(x_p))
    ]  # x_i as an affine function of z
    box = [x_i for x_i in x] + [SIDE - 1 - x_i for x_i in x]
    nest = fourier_motzkin(box, zs)
    out(f"  loop bounds on z for the box 0 <= x < {SIDE} (Fourier–Motzkin):")
    for line in str(nest).splitlines():
        out(f"    {line}")

    via_nest = sorted(
        tuple(x_p[i] + sum(K[i][k] * z[k] for k in range(len(z))) for i in range(len(x_p)))
        for z in enumerate_points(nest, {})
    )
    brute = [
        p
        for p in itertools.product(range(SIDE), repeat=len(x_p))
        if sum(a * v for a, v in zip(A[0], p, strict=True)) == B[0]
    ]
    out(f"  solutions in the box via the loop nest: {len(via_nest)}: {via_nest}")
    out(f"  solutions by brute force over all {SIDE ** len(x_p)} box points: {len(brute)}")
    ok = via_nest == brute
    out("  check: " + ("loop nest == brute force" if ok else "MISMATCH with brute force"))
    return _symbolic_rhs(out, solver) and ok


def _symbolic_rhs(out: Callable[[str], None], solver: IntegerSolver) -> bool:
    """The same box with b left symbolic, as the derivation does; counts checked for many b."""
    sol = solver.solve_affine([Affine.variable("b")])
    K = sol.kernel
    zs = [f"z{k}" for k in range(len(K[0]))]
    x = [x0 + Affine({z: K[i][k] for k, z in enumerate(zs)}) for i, x0 in enumerate(sol.particular)]
    nest = fourier_motzkin([*x, *(SIDE - 1 - x_i for x_i in x)], zs)
    out(f"  with b symbolic: x_p = I b = ({', '.join(map(str, sol.particular))}), bounds:")
    for line in str(nest).splitlines():
        out(f"    {line}")
    counts = {b: 0 for b in range(-4 * SIDE, SIDE + 2)}  # all attainable b, and some more
    for p in itertools.product(range(SIDE), repeat=len(x)):
        b = sum(a * v for a, v in zip(A[0], p, strict=True))
        if b in counts:
            counts[b] += 1
    ok = all(
        sum(1 for _ in enumerate_points(nest, {"b": b})) == n and sol.is_solvable({"b": b})
        for b, n in counts.items()
    )
    out(
        f"  check: solution counts for every b in [{min(counts)}, {max(counts)}] "
        + ("match brute force" if ok else "DO NOT match brute force")
    )
    return ok
