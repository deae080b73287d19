"""The ``tadiff derive`` command: print (and optionally check) the derivatives of a definition.

    tadiff derive "y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])" \\
        --shape x=2x3x9 --shape w=4x3x3 --check

``cli.py`` wires it with :func:`add_derive_parser` and :func:`run_derive`.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from tadiff.errors import InputError
from tadiff.index.function import define
from tadiff.index.numcheck import central_vjp

__all__ = ["CHECK_ELEMENTS", "CHECK_TOLERANCE", "add_derive_parser", "parse_shape", "run_derive"]


CHECK_ELEMENTS = 4096
"""Most elements an argument or the output may have for ``--check`` (central differences run
the reference interpreter twice per element of the argument)."""

CHECK_TOLERANCE = 1e-6
"""Largest accepted check error, relative to ``max(1, max |derivative|)``: central differences
with step 1e-6 in float64 are accurate to about 1e-9 of that scale for smooth functions."""


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
    p.add_argument(
        "--check",
        action="store_true",
        help="compare with central differences (error relative to max(1, max |derivative|), "
        f"at most {CHECK_TOLERANCE:g}; arguments of at most {CHECK_ELEMENTS} elements)",
    )


def _check_shapes(f, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """The output shape for ``--check``, after refusing shapes it cannot use."""
    unknown = [a for a in shapes if a not in f.args]
    if unknown:
        raise InputError(
            f"--shape {unknown[0]}: {f.out_name} has no argument {unknown[0]!r}; arguments: "
            f"{', '.join(f.args)}"
        )
    missing = [a for a in f.args if a not in shapes]
    if missing:
        raise InputError(f"--check needs --shape for {', '.join(missing)}")
    out_shape = f.output_shape(**shapes)
    for name, shape in [*shapes.items(), (f.out_name, out_shape)]:
        if math.prod(shape) > CHECK_ELEMENTS:
            raise InputError(
                f"--check evaluates element by element: {name} of shape {shape} has more than "
                f"{CHECK_ELEMENTS} elements; check with smaller shapes"
            )
    return out_shape


def run_derive(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    """Run ``tadiff derive``; returns the exit status (1 if a check fails).

    ``--check`` compares each derivative with central differences of the reference
    interpreter at random inputs and prints the largest difference, relative to
    ``max(1, max |derivative|)`` (so values near ``e**9`` are judged relatively, gradients
    near zero absolutely), and fails above :data:`CHECK_TOLERANCE`.

    Raises:
        TadiffError: bad definitions, shapes or argument names (the CLI prints them).
    """
    f = define(args.definition)
    shapes = dict(parse_shape(s) for s in args.shape)
    out(f.latex() if args.latex else str(f))
    out_shape = _check_shapes(f, shapes) if args.check else None
    status = 0
    for name in args.wrt or f.args:
        grad = f.grad(name)
        out(grad.latex() if args.latex else str(grad))
        if args.check:
            rng = np.random.default_rng(0)
            arrays = {a: rng.uniform(0.5, 1.5, size=shapes[a]) for a in f.args}
            g = rng.normal(size=out_shape)
            derived = grad.reference(**arrays, **{f.grad_name: g})
            numeric = central_vjp(f, arrays, name, g)
            scale = max(1.0, float(np.max(np.abs(derived), initial=0.0)))
            error = float(np.max(np.abs(derived - numeric), initial=0.0)) / scale
            out(
                f"  max |d{name} - central difference| / max(1, max |d{name}|) = {error:.2e}"
                f" ({'ok' if error <= CHECK_TOLERANCE else 'FAILED'}, tolerance "
                f"{CHECK_TOLERANCE:g})"
            )
            status |= int(not error <= CHECK_TOLERANCE)
    return status
