"""The ``tadiff derive`` command: print (and optionally check) the derivatives of a definition.

    tadiff derive "y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])" \\
        --shape x=2x3x9 --shape w=4x3x3 --check

``cli.py`` wires it with :func:`add_derive_parser` and :func:`run_derive`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from tadiff.errors import InputError
from tadiff.index.function import define
from tadiff.index.numcheck import central_vjp

__all__ = ["add_derive_parser", "parse_shape", "run_derive"]


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``"x=3x5"`` -> ``("x", (3, 5))``; ``"s="`` is a scalar.

    Raises:
        InputError: naming the malformed text.
    """
    name, sep, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split("x")) if dims else ()
    except ValueError:
        shape = None
    if not sep or not name or shape is None or any(n < 1 for n in shape):
        raise InputError(
            f"--shape {text!r}: expected NAME=N1xN2x... with positive sizes, e.g. x=3x5"
        )
    return name, shape


def add_derive_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``derive`` subcommand to an argparse subparsers object."""
    p = sub.add_parser(
        "derive", help="print the symbolic derivatives of an index-notation definition"
    )
    p.add_argument("definition", help='e.g. "y[i,j] = sum[k](x[i,k] * w[k,j])"')
    p.add_argument("--shape", action="append", default=[], help="argument shape, e.g. x=3x5")
    p.add_argument(
        "--wrt", action="append", default=[], help="argument to derive for (default all)"
    )
    p.add_argument("--latex", action="store_true", help="print LaTeX instead of text")
    p.add_argument("--check", action="store_true", help="compare with central differences")


def run_derive(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    """Run ``tadiff derive``; returns the exit status (1 if a check fails).

    Raises:
        TadiffError: bad definitions, shapes or argument names (the CLI prints them).
    """
    f = define(args.definition)
    shapes = dict(parse_shape(s) for s in args.shape)
    out(f.latex() if args.latex else str(f))
    status = 0
    for name in args.wrt or f.args:
        grad = f.grad(name)
        out(grad.latex() if args.latex else str(grad))
        if args.check:
            missing = [a for a in f.args if a not in shapes]
            if missing:
                raise InputError(f"--check needs --shape for {', '.join(missing)}")
            rng = np.random.default_rng(0)
            arrays = {a: rng.uniform(0.5, 1.5, size=shapes[a]) for a in f.args}
            g = rng.normal(size=f(**arrays).shape)
            derived = grad(**arrays, **{f.grad_name: g})
            error = float(np.max(np.abs(derived - central_vjp(f, arrays, name, g))))
            out(f"  max |d{name} - central difference| = {error:.2e}")
            status |= int(not error < 1e-6)
    return status
