"""Parser: accepted syntax, errors with columns, and a hypothesis fuzz."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tadiff.errors import ParseError, TadiffError
from tadiff.index.expr import Access, Affine, Sum, Where
from tadiff.index.function import define
from tadiff.index.parse import parse


def test_parses_the_issue_examples():
    d = parse("f[i,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] + d[i+k]**3))")
    assert d.out_name == "f" and d.out_vars == ("i", "j")
    assert d.arg_ranks == {"a": 2, "b": 2, "c": 2, "d": 1}
    conv = parse("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    accesses = [n for n in _walk(conv.body) if isinstance(n, Access)]
    t, k = Affine.variable("t"), Affine.variable("k")
    assert accesses[0].indices[2] == 2 * t + k


def _walk(node):
    from tadiff.index.expr import walk

    return walk(node)


def test_explicit_ranges_are_half_open_and_sizes_explicit():
    d = parse("y[i, j:4] = sum[k=1:5](x[i, k] * 2) + j")
    assert d.out_sizes == (None, 4)
    (s,) = [n for n in _walk(d.body) if isinstance(n, Sum)]
    assert s.lower == (Affine.constant(1),) and s.upper == (Affine.constant(4),)


def test_bounds_with_max_min_ceil_floor_and_sizes():
    d = parse("y[p] = sum[t=max(0, ceil((p - 2)/2)):min(x.shape[0], floor(p/2) + 1)](x[t])")
    (s,) = [n for n in _walk(d.body) if isinstance(n, Sum)]
    p = Affine.variable("p")
    assert s.lower == (Affine.constant(0), (p - 2) / 2)
    assert s.upper == (Affine.variable("x.shape[0]") - 1, p / 2)


def test_where_conditions():
    d = parse("y[i,j] = where(i == j and i % 2 == 0 and i < 3, x[i,j], 0)")
    assert isinstance(d.body, Where)
    assert [c.kind for c in d.body.conds] == ["eq", "mod", "ge"]


def test_scalar_argument_and_scalar_output():
    d = parse("s[] = a[] * 2")
    assert d.out_vars == () and d.arg_ranks == {"a": 0}


# -- errors name the column and what was expected ------------------------------------------------


@pytest.mark.parametrize(
    ("source", "column", "message"),
    [
        ("y[i] = x[i", 10, r"expected ',' or '\]' in the indices of x, found end of input"),
        ("y[i] = (x[i] + 1", 16, r"expected '\)' to close '\('"),
        ("y[i] = x[i]) ", 11, "expected an operator or end of input, found '\\)'"),
        ("y[i] = foo(x[i])", 7, "unknown function 'foo'; expected one of exp, log"),
        ("y[i,j] = x[i*j]", 12, r"index expression \(i\) \* \(j\) is not affine"),
        ("y[i] = x[j]", 9, "unknown index 'j': not an output or sum index"),
        ("y[i] = x[i] * j", 14, "unknown index 'j'"),
        ("y[i] = sum[i](x[i])", 11, "sum index 'i' is already an output index"),
        ("y[i] = x[i] * i[0]", 14, "'i' is an index and cannot also be a tensor"),
        ("y[i] = x[i] + x[i, 0]", 14, "x is used with 2 indices here but with 1 before"),
        ("y[i] = x[i] $ 2", 12, r"unexpected character '\$'"),
        ("y[i] = y[i]", 7, "'y' is the defined tensor"),
        ("y[i,i] = x[i]", 4, "output index 'i' appears twice"),
        ("y[i] = x[i] = 2", 12, "expected an operator or end of input, found '='"),
        ("y[i] = x[i/0]", 11, "division by zero in an index"),
        ("y[i] = x[0.5]", 9, "index constants must be integers"),
        ("y[i] = exp(x[i], 2)", 7, r"exp takes 1 argument\(s\), got 2"),
        ("y[i] = x[i + y.shape[0]]", 13, "'y' is the defined tensor"),
        ("y[i] = x[i] * x.shape[1]", 14, "unknown index 'x'"),
        ("y[i] = where(i, x[i], 0)", 14, "expected a comparison"),
        ("[i] = x[i]", 0, "expected the name of the defined tensor"),
        ("y[i] x[i]", 5, "expected '=' after the output"),
        ("y[i] = ", 7, "expected a number, a name or '\\(', found end of input"),
        ("y[i:0] = x[i]", 4, "an output size must be at least 1"),
    ],
)
def test_parse_errors_point_at_the_column(source, column, message):
    with pytest.raises(ParseError, match=message) as info:
        parse(source)
    assert info.value.column == column
    assert "^" in str(info.value)  # the caret line under the source


def test_non_string_source():
    with pytest.raises(ParseError, match="must be a str"):
        parse(3)


_PIECES = [
    "y", "x", "w", "i", "j", "k", "[", "]", "(", ")", ",", "=", ":", "+", "-", "*", "/", "**",
    "sum", "where", "exp", "maximum", "0", "1", "2", "2.5", " ", "==", "<", "%", "and", ".shape",
    "max", "ceil", "floor", "!", "#",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=25) | st.text(max_size=30))
def test_fuzz_only_tadiff_errors_escape(pieces):
    source = pieces if isinstance(pieces, str) else "".join(pieces)
    for text in (source, "y[i] = " + source, "y[i,j] = sum[k](" + source + ")"):
        with contextlib.suppress(TadiffError):
            define(text)  # parse, then range inference
