"""``cat``'s argument forms against torch: values, gradients and the node recorded."""

import numpy as np
import pytest

import tadiff as td

torch = pytest.importorskip("torch")


def _inputs(m, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    a = m.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    b = m.nn.Parameter(m.tensor(rng.standard_normal((2, 1))))
    c = m.tensor(rng.standard_normal((2, 2)))  # no gradient: its block is skipped
    return a, b, c


@pytest.mark.parametrize(
    "form",
    [
        lambda m, a, b, c: m.cat((a, b, c), 1),
        lambda m, a, b, c: m.cat([a, b, c], dim=-1),
        lambda m, a, b, c: m.cat([a, b, c], axis=1),
        lambda m, a, b, c: m.cat((a.T, b.T, c.T)),
        lambda m, a, b, c: m.cat((c, a * 2, a), dim=1),
    ],
    ids=["tuple", "list-negative-dim", "axis", "dim0", "repeated"],
)
def test_cat_forms_match_torch(form):
    results = []
    for m in (td, torch):
        a, b, c = _inputs(m)
        out = form(m, a, b, c)
        weights = m.tensor(np.arange(out.numel(), dtype=np.float64).reshape(tuple(out.shape)))
        (out * weights).sum().backward()
        grads = [None if t.grad is None else t.grad.numpy() for t in (a, b)]
        results.append((out.detach().numpy(), grads, type(out.grad_fn).__name__))
    ours, theirs = results
    np.testing.assert_array_equal(ours[0], theirs[0])  # copies: exact
    for g, h in zip(ours[1], theirs[1], strict=True):
        if h is None:
            assert g is None
        else:  # slices of the weights: exact
            np.testing.assert_array_equal(g, h)
    assert ours[2] == theirs[2] == "CatBackward0"
