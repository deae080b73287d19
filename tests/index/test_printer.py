"""Printed text reads back: the parser turns every printed function into one with equal values."""

from __future__ import annotations

import numpy as np
import pytest
from test_derive import CORPUS

from tadiff.index.function import define
from tadiff.index.interpret import evaluate
from tadiff.index.parse import parse
from tadiff.index.printer import affine_text
from tadiff.intlinalg import Affine


@pytest.mark.parametrize(("source", "shapes"), CORPUS, ids=[c[0] for c in CORPUS])
def test_printed_functions_and_gradients_read_back(source, shapes):
    rng = np.random.default_rng(11)
    f = define(source)
    arrays = {name: rng.uniform(0.3, 0.9, size=shapes[name]) for name in f.args}
    y = f.reference(**arrays)
    # the text read back may group a sum's terms differently: equal to rounding, not bit for bit
    np.testing.assert_allclose(define(str(f)).reference(**arrays), y, rtol=1e-13, atol=1e-15)
    args = {**arrays, f.grad_name: rng.normal(size=y.shape)}
    for name in f.args:
        grad = f.grad(name)
        again = parse(str(grad))
        assert again.out_vars == grad.out_vars
        arg_shapes = {k: v.shape for k, v in args.items()}
        shape = grad.output_shape(**arg_shapes)
        params = grad._params(arg_shapes)
        # the text groups chains of * and + left to right, which may round differently from
        # the tree it was printed from in the last bit; the value is otherwise the same
        np.testing.assert_allclose(
            evaluate(grad.out_vars, shape, again.body, args, params),
            grad.reference(**args),
            rtol=1e-13,
        )
        assert grad.latex().startswith(r"\mathit{d")


def test_affine_text_orders_by_scope_and_uses_a_common_denominator():
    t, k, p = Affine.variable("t"), Affine.variable("k"), Affine.variable("p")
    assert affine_text(2 * t + k, ["t", "k"]) == "2*t + k"
    assert affine_text(k + 2 * t, ["k", "t"]) == "k + 2*t"
    assert (
        affine_text((p - Affine.variable("w.shape[2]") + 1) / 2, ["p"]) == "(p - w.shape[2] + 1)/2"
    )
    assert affine_text(p / 2, ["p"]) == "p/2"
