"""``tadiff derive`` (wired into cli.py by the lead) prints and checks derivatives."""

from __future__ import annotations

import argparse
import re

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
    assert lines[2].startswith("  max |dx - central difference| / max(1, max |dx|) = ")
    assert float(lines[2].split("= ")[-1].split()[0]) < 1e-6


def test_check_is_relative_to_the_derivative():
    # values near e**9 = 8103: central differences are off by about 1e-5 absolutely, 1e-10
    # relatively; the check passes and says how it measured
    lines: list[str] = []
    args = _parse(["y[i] = exp(9*x[i])", "--shape", "x=4", "--check"])
    assert run_derive(args, lines.append) == 0
    assert "/ max(1, max |dx|)" in lines[2] and "(ok, tolerance 1e-06)" in lines[2]


def test_a_wrong_derivative_fails_the_check(monkeypatch):
    import tadiff.index.command as command

    exact = command.central_vjp
    monkeypatch.setattr(command, "central_vjp", lambda *a: exact(*a) * (1 + 1e-4))
    lines: list[str] = []
    args = _parse(["y[i] = exp(9*x[i])", "--shape", "x=4", "--check"])
    assert run_derive(args, lines.append) == 1
    assert "FAILED" in lines[2]


def test_derive_latex_for_one_argument():
    lines: list[str] = []
    assert run_derive(_parse(["y[i] = x[2*i]", "--wrt", "x", "--latex"]), lines.append) == 0
    assert lines[-1].startswith(r"\mathit{dx}_{p} = \left[2 \mid p")


def test_bad_shape_and_missing_shape():
    with pytest.raises(InputError, match="expected NAME=N1xN2"):
        parse_shape("x=3y5")
    with pytest.raises(InputError, match="expected NAME=N1xN2"):
        parse_shape("x=" + "9" * 5000)  # beyond Python's integer-string limit
    with pytest.raises(InputError, match="--check needs --shape for w"):
        run_derive(_parse(["y[i] = x[i] * w[i]", "--shape", "x=3", "--check"]), lambda s: None)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ("x=100000000000000000000", r"x of shape \(100000000000000000000,\) has more than 4096"),
        ("x=3x3", r"argument x of y is indexed with 1 indices but has shape \(3, 3\)"),
        ("q=3", "y has no argument 'q'"),
    ],
)
def test_shapes_the_check_cannot_use_exit_2_with_a_message(shape, message, capsys):
    from tadiff.cli import main

    argv = ["derive", "y[i] = exp(9*x[i])", "--shape", "x=3", "--shape", shape, "--check"]
    if shape.startswith("x="):
        argv = ["derive", "y[i] = exp(9*x[i])", "--shape", shape, "--check"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tadiff derive: ") and "Traceback" not in err
    assert re.search(message, err)
