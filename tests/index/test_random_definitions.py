"""Hypothesis: random affine index maps and random scalar bodies, derived and checked.

Each example is a definition with random integer index matrices (coefficients in -2..2, an
argument possibly used twice with different maps), explicit output sizes and sum ranges, and
argument shapes just large enough (plus a random margin, so some elements are never read).
Every gradient must equal the brute-force scatter oracle and central differences, and the
derivative of one derivative must equal the scatter oracle applied to that derivative.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from index_oracles import central_vjp, scatter_vjp

from tadiff.index.function import define
from tadiff.index.interpret import evaluate
from tadiff.index.parse import parse

_WRAPPERS = ["{}", "sin({})", "tanh({})", "({})**2", "exp(0.5*{})"]


def _index_text(row: list[int], names: list[str], const: int) -> str:
    parts = [f"{c}*{n}" for c, n in zip(row, names, strict=True) if c]
    parts.append(str(const))
    return " + ".join(parts).replace("+ -", "- ")


@st.composite
def definitions(draw):
    out_vars = ["i", "j"][: draw(st.integers(1, 2))]
    sum_vars = ["k", "l"][: draw(st.integers(0, 2))]
    names = out_vars + sum_vars
    size = {v: draw(st.integers(1, 3)) for v in names}
    ranks: dict[str, int] = {}
    accesses = []
    for _ in range(draw(st.integers(1, 3))):
        arg = draw(st.sampled_from(["x", "w"]))
        rank = ranks.setdefault(arg, draw(st.integers(1, 2)))
        rows = [[draw(st.integers(-2, 2)) for _ in names] for _ in range(rank)]
        accesses.append((arg, rows))
    # offsets and shapes so that every access stays in bounds
    shape: dict[str, list[int]] = {a: [0] * r for a, r in ranks.items()}
    texts = []
    for arg, rows in accesses:
        dims = []
        for d, row in enumerate(rows):
            lo = sum(min(0, c * (size[v] - 1)) for c, v in zip(row, names, strict=True))
            hi = sum(max(0, c * (size[v] - 1)) for c, v in zip(row, names, strict=True))
            const = -lo + draw(st.integers(0, 1))
            shape[arg][d] = max(shape[arg][d], hi + const + 1)
            dims.append(_index_text(row, names, const))
        wrapper = draw(st.sampled_from(_WRAPPERS))
        texts.append(wrapper.format(f"{arg}[{', '.join(dims)}]"))
    for arg in shape:
        shape[arg] = [n + draw(st.integers(0, 1)) for n in shape[arg]]
    body = texts[0]
    for t in texts[1:]:
        body = f"{body} {draw(st.sampled_from(['+', '*', '-']))} {t}"
    if draw(st.booleans()):  # a condition on the indices: deltas, half-spaces, divisibility
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        cond = draw(
            st.sampled_from(
                [f"{a} == {b}", f"{a} != {b}", f"{a} >= {b}", f"2*{a} < {b} + 1",
                 f"({a} + {b}) % 2 == 0", f"{a} == 1 and {b} <= 1"]
            )
        )  # fmt: skip
        other = draw(st.sampled_from(["0", texts[-1]]))
        body = f"where({cond}, {body}, {other})"
    if sum_vars:
        # the first sum may be triangular, bounded by the first output index (which stays
        # inside its own range, so the access offsets above remain valid)
        upper = {v: str(size[v]) for v in sum_vars}
        if size[sum_vars[0]] >= size[out_vars[0]] and draw(st.booleans()):
            upper[sum_vars[0]] = f"{out_vars[0]} + 1"
        body = f"sum[{', '.join(f'{v}=0:{upper[v]}' for v in sum_vars)}]({body})"
    head = f"y[{', '.join(f'{v}:{size[v]}' for v in out_vars)}]"
    return f"{head} = {body}", {a: tuple(s) for a, s in shape.items()}


_SETTINGS = settings(
    max_examples=40,
    deadline=timedelta(seconds=20),  # examples take about 0.1 s: room for a loaded machine
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@_SETTINGS
@given(definitions(), st.integers(0, 2**32 - 1))
def test_random_definition_gradients(case, seed):
    source, shapes = case
    f = define(source)
    rng = np.random.default_rng(seed)
    arrays = {a: rng.uniform(-1, 1, size=shapes[a]) for a in f.args}
    y = f.reference(**arrays)
    g = rng.normal(size=y.shape)
    for name in f.args:
        grad = f.grad(name)
        derived = grad.reference(**arrays, **{f.grad_name: g})
        np.testing.assert_allclose(
            derived, scatter_vjp(f, arrays, name, g), rtol=1e-10, atol=1e-10, err_msg=str(grad)
        )
        np.testing.assert_allclose(
            derived, central_vjp(f, arrays, name, g), rtol=1e-5, atol=1e-7, err_msg=str(grad)
        )
        # the printed derivative reads back to a function with the same values (up to the
        # last bit: the text groups chains of + and * left to right)
        again = parse(str(grad))
        args = {**arrays, f.grad_name: g}
        arg_shapes = {k: v.shape for k, v in args.items()}
        reread = evaluate(again.out_vars, derived.shape, again.body, args, grad._params(arg_shapes))
        np.testing.assert_allclose(reread, derived, rtol=1e-13, atol=1e-15, err_msg=str(grad))


@settings(
    max_examples=20,
    deadline=timedelta(seconds=20),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(definitions(), st.integers(0, 2**32 - 1), st.data())
def test_random_definition_second_order(case, seed, data):
    source, shapes = case
    f = define(source)
    rng = np.random.default_rng(seed)
    arrays = {a: rng.uniform(-1, 1, size=shapes[a]) for a in f.args}
    first = data.draw(st.sampled_from(f.args))
    g1 = f.grad(first)
    args1 = {**arrays, f.grad_name: rng.normal(size=f.reference(**arrays).shape)}
    second = data.draw(st.sampled_from(g1.args))
    gg = rng.normal(size=g1(**args1).shape)
    derived = g1.grad(second)(**args1, **{g1.grad_name: gg})
    np.testing.assert_allclose(
        derived, scatter_vjp(g1, args1, second, gg), rtol=1e-10, atol=1e-10, err_msg=str(g1)
    )


@pytest.mark.slow
@settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(definitions(), st.integers(0, 2**32 - 1), st.data())
def test_random_definitions_stress(case, seed, data):
    """Many more examples of both checks above (run with ``pytest -m slow``)."""
    test_random_definition_gradients.hypothesis.inner_test(case, seed)
    test_random_definition_second_order.hypothesis.inner_test(case, seed, data)
