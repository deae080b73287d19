"""Totality: whatever the text, every call ends in a result or a tadiff error, in bounded time.

Adversarial texts (deep nesting, long sums, power towers, huge literals and coefficients,
non-ASCII, names such as ``__import__``, megabytes of text) and a Hypothesis property that
mutates valid definitions drive the whole pipeline: ``define``, printing and reading back,
``grad`` and printing it, and evaluation by the reference interpreter and the compiled default
backend on small arrays. Every call must return, or raise a :class:`tadiff.errors.TadiffError`
(a ParseError with the column at fault where the text is refused) — never a RecursionError,
ValueError, MemoryError, OverflowError or a backend's own exception — within :data:`SECONDS`.
"""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_derive import CORPUS

from tadiff.errors import DerivationError, ParseError, TadiffError
from tadiff.index.function import define
from tadiff.index.parse import MAX_DEPTH, MAX_NESTING

SECONDS = 30.0
"""Bound on one call on the 2-core development machine under load (they take well under a
second except the megabyte texts: about 2 s to parse a megabyte)."""


def _timed(call, *args, **kwargs):
    start = time.perf_counter()
    try:
        return call(*args, **kwargs), None
    except TadiffError as exc:
        return None, exc
    finally:
        assert time.perf_counter() - start < SECONDS, f"{call} took too long"


def _arrays(fn, size: int = 2) -> dict[str, np.ndarray]:
    return {a: np.linspace(0.2, 0.9, size ** fn.arg_ranks[a]).reshape((size,) * fn.arg_ranks[a])
            for a in fn.args}  # fmt: skip


def exercise(text: str, evaluate: bool = True) -> str:
    """Run ``text`` through every stage; returns how far it got (for the test's messages)."""
    f, error = _timed(define, text)
    if error is not None:
        if isinstance(error, ParseError):
            assert error.column is not None and 0 <= error.column <= len(text), error
        return f"refused: {type(error).__name__}"
    printed, _ = _timed(str, f)
    again, error = _timed(define, printed)
    assert error is None, f"the printed definition does not read back: {error}"
    assert again.body is f.body
    if evaluate:
        arrays = _arrays(f)
        y, _ = _timed(f.reference, **arrays)
        _timed(f, **arrays)
    for name in f.args:
        grad, error = _timed(f.grad, name)
        if error is not None:
            continue
        _timed(str, grad)
        if evaluate and y is not None:
            _timed(grad.reference, **arrays, **{f.grad_name: np.ones(y.shape)})
    return "defined"


BIG = "1000000000000"
HUGE = "100000000000000000000"

ADVERSARIAL = {
    "300 nested parentheses": "y[i] = " + "(" * 300 + "x[i]" + ")" * 300,
    "2000 unary minuses": "y[i] = " + "-" * 2000 + "x[i]",
    "a power tower of 600": "y[i] = " + "**".join(["x[i]"] * 600),
    "nested calls": "y[i] = " + "exp(" * 200 + "x[i]" + ")" * 200,
    "nested sums": "y[i] = " + "".join(f"sum[k{n}=0:2](" for n in range(100)) + "x[i]" + ")" * 100,
    "nested index parentheses": "y[i] = x[" + "(" * 300 + "i" + ")" * 300 + "]",
    "a sum of 600 terms": "y[i] = " + " + ".join(f"x[i]*{k}" for k in range(600)),
    "300 terms to derive": "y[i] = " + " + ".join(f"sin(x[i]*{k})" for k in range(300)),
    "a product of 600 factors": "y[i] = " + " * ".join(["x[i]"] * 600),
    "5000-digit index": "y[i] = x[i + " + "1" * 5000 + "]",
    "5000-digit size": "y[i:" + "9" * 5000 + "] = x[0]",
    "5000-digit modulus": "y[i:2] = where(i % " + "7" * 5000 + " == 0, x[i], 0)",
    "5000-digit number": "y[i] = x[i] * " + "1" * 5000,
    "huge exponent": "y[i] = x[i] * 1e99999999",
    "coefficient 10**12": f"y[i:3, j:3] = where(i == j, x[{BIG}*i - {BIG}*j + i], 0)",
    "coefficient 10**20": f"y[i:3, j:3] = where((i-j) % 5 == 0, x[{HUGE}*i - {HUGE}*j + i], 0)",
    "size 10**20": f"y[i:{HUGE}] = x[0]",
    "sizes of 10**12": f"y[i:{BIG}, j:{BIG}] = x[0]",
    "non-ASCII name": "y[é] = x[é]",
    "non-ASCII operator": "y[i] = x[i] ∗ 2",
    "non-ASCII digits": "y[i] = x[i] * ١٢",
    "a dunder name": "y[i] = __import__[i] * __class__[i]",
    "attribute access": "y[i] = x[i].__class__",
    "keywords as names": "sum[i] = where[i]",
    "inf and nan as names": "y[inf] = nan[inf]",
    "a shape of a reserved word": "y[i] = x[i + sum.shape[0]]",
    "a dimension of 10**30": "y[i] = x[i + x.shape[" + "1" * 30 + "]]",
    "empty": "",
    "only spaces": " \t\n ",
    "NUL": "y[i] = x[i]\x00",
    "unterminated": "y[i] = sum[k](x[i, k]",
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_text_ends_in_a_result_or_a_tadiff_error(text):
    exercise(text)


def test_nesting_at_the_limit_is_accepted_and_one_more_refused_at_its_column():
    depth = MAX_NESTING - 2  # the body's own level and the power's base
    inside = "y[i] = " + "(" * depth + "x[i]" + ")" * depth
    assert exercise(inside) == "defined"
    outside = "y[i] = " + "(" * (MAX_NESTING + 1) + "x[i]" + ")" * (MAX_NESTING + 1)
    with pytest.raises(ParseError, match=f"more than {MAX_NESTING} levels") as info:
        define(outside)
    assert info.value.column == len("y[i] = ") + MAX_NESTING  # where level 65 would begin


def test_deep_expressions_derive_twice_and_evaluate_everywhere():
    # a sin tower a quarter as deep as the text may nest (its second derivative nests about
    # twice as deep): derive, derive the derivative, evaluate all three on the interpreter and
    # on the compiled backends (whose passes over the tree are recursive), read each back
    depth = MAX_NESTING // 4
    f = define("y[i] = " + "sin(" * depth + "x[i]" + ")" * depth)
    x = np.array([0.3, 0.5])
    g = f.grad("x")
    gg = g.grad("x")
    for fn, args in [(f, {"x": x}), (g, {"x": x, "dy": np.ones(2)}),
                     (gg, {"x": x, "dy": np.ones(2), "ddx": np.ones(2)})]:  # fmt: skip
        reference = fn.reference(**args)
        for backend in ("numpy", "numba"):
            got = fn.evaluate(args, backend=backend)
            # the same formula evaluated in another order: equal to rounding
            np.testing.assert_allclose(got, reference, rtol=1e-12, err_msg=backend)
        assert str(define(str(fn))) == str(fn)


def test_at_the_nesting_limit_a_derivative_is_refused_with_a_clear_error():
    # the derivative of a tower at the limit prints three levels deeper than the parser reads
    depth = MAX_NESTING - 2
    f = define("y[i] = " + "sin(" * depth + "x[i]" + ")" * depth)
    with pytest.raises(DerivationError, match=f"nests more than {MAX_NESTING} levels"):
        f.grad("x")


def test_trees_deeper_than_the_limit_are_refused_at_their_column():
    # long chains are grouped as balanced trees, 11 levels for 1024 terms: 30 levels of
    # parentheses, each holding such a chain, make a tree over 300 levels deep
    inner = "x[i]"
    for _ in range(30):
        inner = "(" + " + ".join(["x[i]"] * 1023 + [inner]) + ")"
    text = "y[i] = " + inner
    with pytest.raises(ParseError, match=f"more than {MAX_DEPTH}") as info:
        define(text)
    assert 0 < info.value.column <= len(text)


def test_a_megabyte_that_simplifies_away():
    text = "y[i] = x[i]" + " * 1" * 300_000  # 1.2 MB
    start = time.perf_counter()
    f = define(text)
    assert time.perf_counter() - start < SECONDS
    assert str(f) == "y[i] = x[i]"


def test_a_long_sum_evaluates_and_derives():
    f = define("y[i] = " + " + ".join(f"x[i]*{k}" for k in range(600)))
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(f(x=x), x * sum(range(600)), rtol=1e-13)
    np.testing.assert_allclose(f.grad("x")(x=x, dy=np.ones(2)), [sum(range(600))] * 2, rtol=1e-13)


# -- property: mutated definitions --------------------------------------------------------------

_PIECES = [
    "(", ")", "[", "]", ",", "+", "-", "*", "/", "**", "=", ":", "%", "==", "<", "and",
    "sum[k]", "sum[q=0:3]", "where(i == 0, ", "exp(", "maximum(", "x.shape[0]", "i", "k", "j",
    "2", "0", "1e999", "inf", "nan", BIG, HUGE, "9" * 50, "é", "∗", "__import__", "\x00",
    "(" * 80, ")" * 80, "-" * 80, "x[i]" + "**x[i]" * 80, " + x[i]" * 80,
]  # fmt: skip


@st.composite
def mutated(draw):
    text = draw(st.sampled_from([source for source, _ in CORPUS]))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "duplicate", "replace", "number"]))
        digits = [k for k, ch in enumerate(text) if ch.isdigit()]
        if action == "number" and digits:  # keeps the text valid more often: other sizes
            at = draw(st.sampled_from(digits))
            number = draw(st.sampled_from(["0", "3", "17", BIG, HUGE, "4294967297"]))
            text = text[:at] + number + text[at + 1 :]
        elif action == "insert":
            text = text[:at] + draw(st.sampled_from(_PIECES)) + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 5)) :]
        elif action == "duplicate":
            end = draw(st.integers(at, len(text)))
            text = text[:end] + text[at:end] + text[end:]
        else:
            text = text[:at] + draw(st.characters(max_codepoint=0x2FFF)) + text[at + 1 :]
    return text


@settings(
    max_examples=80,
    deadline=timedelta(seconds=4 * SECONDS),  # each call is held to SECONDS by _timed
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutated())
def test_mutated_definitions_end_in_a_result_or_a_tadiff_error(text):
    exercise(text)


@pytest.mark.slow
@settings(
    max_examples=2000,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutated())
def test_mutated_definitions_stress(text):
    """The property above on many more examples (``pytest -m slow``, about ten seconds)."""
    exercise(text)
