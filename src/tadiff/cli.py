"""The ``tadiff`` command line: ``tadiff --version``, ``tadiff demo``, ``tadiff derive``.

``tadiff demo`` runs one showcase per capability that has landed. Each showcase lives next to the
code it shows (``tadiff/<layer>/demo.py``) and exposes ``run(out) -> bool``: it prints through
``out`` and returns whether every self-check it made (against brute force or another oracle)
passed, so the demo doubles as a smoke test.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

import tadiff
from tadiff.errors import TadiffError
from tadiff.index.command import add_derive_parser, run_derive

# (title, module): shown in this order; a module that is absent is skipped so that the demo grows
# as capabilities land.
_SHOWCASES: list[tuple[str, str]] = [
    ("Exact integer linear algebra", "tadiff.intlinalg.demo"),
    ("Autograd engine", "tadiff.autograd.demo"),
    ("Index notation and symbolic derivatives", "tadiff.index.demo"),
    ("Sinkhorn-Knopp with implicit differentiation", "tadiff.structured.sinkhorn_demo"),
    ("FastH: products of Householder matrices", "tadiff.structured.householder_demo"),
    ("Training: nn, optim and the backward-graph picture", "tadiff.nn.demo"),
]


def _run_demo(out: Callable[[str], None]) -> int:
    failed = []
    for title, module_name in _SHOWCASES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # capability not landed yet
            raise
        out(f"\n=== {title} ===")
        if not module.run(out):
            failed.append(title)
    if failed:
        out(f"\nFAILED self-checks: {', '.join(failed)}")
        return 1
    out("\nAll self-checks passed.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tadiff", description=tadiff.__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tadiff {tadiff.__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("demo", help="run the showcase of every capability, with self-checks")
    add_derive_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _run_demo(print)
    if args.command == "derive":
        try:
            return run_derive(args)
        except TadiffError as exc:
            # A user's typo deserves the message, not a traceback.
            print(f"tadiff derive: {exc}", file=sys.stderr)
            return 2
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
