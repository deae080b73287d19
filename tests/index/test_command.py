"""``tadiff derive`` (wired into cli.py by the lead) prints and checks derivatives."""

from __future__ import annotations

import argparse

import pytest

from tadiff.errors import InputError
from tadiff.index.command import add_derive_parser, parse_shape, run_derive


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_derive_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["derive", *argv])


def test_derive_prints_and_checks():
    lines: list[str] = []
    args = _parse(
        ["y[i,j] = sum[k](x[i,k] * w[k,j])", "--shape", "x=2x3", "--shape", "w=3x2", "--check"]
    )
    assert run_derive(args, lines.append) == 0
    assert lines[1] == "dx[i, k] = sum[j=0:w.shape[1]](dy[i, j] * w[k, j])"
    assert lines[2].startswith("  max |dx - central difference| = ")
    assert float(lines[2].split("=")[-1]) < 1e-6


def test_derive_latex_for_one_argument():
    lines: list[str] = []
    assert run_derive(_parse(["y[i] = x[2*i]", "--wrt", "x", "--latex"]), lines.append) == 0
    assert lines[-1].startswith(r"\mathit{dx}_{p} = \left[2 \mid p")


def test_bad_shape_and_missing_shape():
    with pytest.raises(InputError, match="expected NAME=N1xN2"):
        parse_shape("x=3y5")
    with pytest.raises(InputError, match="--check needs --shape for w"):
        run_derive(_parse(["y[i] = x[i] * w[i]", "--shape", "x=3", "--check"]), lambda s: None)
