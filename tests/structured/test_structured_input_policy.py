"""One policy for bad input to the structured ops, at every entry point (NumPy arrays, tadiff
Tensors, ``tadiff.torch`` Functions, the ``torch.library`` ops):

- the inputs that define the structured matrix — Sinkhorn's logits ``X`` and marginals, FastH's
  reflectors ``V`` — must be finite: a NaN or inf there raises an ``InputError`` naming the index;
- the data a structured matrix is applied to (FastH's ``X``) passes through like in a matrix
  product: a NaN spoils only the output columns that read it;
- an empty batch of matrices to balance is a ``ShapeError`` naming the shape;
- Sinkhorn warns (``ConvergenceWarning``) when it returns a matrix whose column sums are more than
  ``warn_tol`` (1e-3 of the largest marginal by default) off, because its implicit backward is
  the gradient of the balanced limit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import ConvergenceError, ConvergenceWarning, InputError, ShapeError
from tadiff.structured import householder as hh
from tadiff.structured.sinkhorn import sinkhorn_forward, sinkhorn_vjp

torch = pytest.importorskip("torch")
import tadiff.torch as tdt  # noqa: E402
from tadiff.torch import library  # noqa: E402


def _sinkhorn_entry_points():
    """name -> call(X as a float64 NumPy array, **keywords)."""
    return {
        "numpy": lambda X, **kw: td.sinkhorn(X, **kw),
        "engine": lambda X, **kw: td.sinkhorn(td.tensor(X, requires_grad=True), **kw),
        "tadiff.torch": lambda X, **kw: tdt.sinkhorn(torch.tensor(X, requires_grad=True), **kw),
        "torch.library": lambda X, **kw: library.sinkhorn(
            torch.tensor(X, requires_grad=True), **kw
        ),
    }


SINKHORN = _sinkhorn_entry_points()


def _fasth_entry_points():
    """name -> call(V, X as float64 NumPy arrays)."""
    t = torch.tensor
    return {
        "numpy": lambda V, X: hh.householder_apply(V, X),
        "engine": lambda V, X: td.householder_apply(td.tensor(V, requires_grad=True), td.tensor(X)),
        "tadiff.torch": lambda V, X: tdt.householder_apply(t(V, requires_grad=True), t(X)),
        "torch.library": lambda V, X: library.householder_apply(t(V, requires_grad=True), t(X)),
        "torch.func.vmap": lambda V, X: torch.func.vmap(lambda x: tdt.householder_apply(t(V), x))(
            t(X)[None]
        ),
    }


FASTH = _fasth_entry_points()


def _as_array(out):
    out = out.detach() if isinstance(out, torch.Tensor) else out
    return np.asarray(out.numpy() if hasattr(out, "numpy") else out)


@pytest.mark.parametrize("entry", sorted(SINKHORN))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_sinkhorn_refuses_non_finite_logits_naming_the_index(entry, bad):
    X = np.zeros((2, 3, 3))
    X[1, 2, 0] = bad
    with pytest.raises(InputError, match=rf"X\[1, 2, 0\] = {bad}"):
        SINKHORN[entry](X)


@pytest.mark.parametrize("entry", sorted(SINKHORN))
@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 4, 4)])
def test_sinkhorn_refuses_an_empty_batch_naming_its_shape(entry, shape):
    with pytest.raises(ShapeError, match=rf"X of shape \({shape[0]}, .* has an empty batch"):
        SINKHORN[entry](np.zeros(shape))


def test_an_empty_batch_of_marginals_or_of_matrices_to_differentiate_is_refused():
    with pytest.raises(ShapeError, match=r"the marginal a of shape \(0, 3\) has an empty batch"):
        td.sinkhorn(np.zeros((1, 3, 3)), np.ones((0, 3)))
    with pytest.raises(ShapeError, match=r"R of shape \(0, 3, 3\) has an empty batch"):
        sinkhorn_vjp(np.zeros((0, 3, 3)), np.zeros((0, 3, 3)))


# inputs of scale 3 are about 3e-2 off after 20 iterations and balanced after 500
_UNBALANCED = np.random.default_rng(0).normal(size=(8, 4, 4)) * 3


@pytest.mark.parametrize("entry", sorted(SINKHORN))
def test_sinkhorn_warns_by_default_when_it_returns_an_unbalanced_matrix(entry):
    with pytest.warns(
        ConvergenceWarning, match=r"off by .* after 20 iterations; the implicit"
    ) as w:
        R = _as_array(SINKHORN[entry](_UNBALANCED))
    assert w[0].filename == __file__  # the caller's line
    assert abs(R.sum(-2) - 1).max() > 1e-3  # the warning was right
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SINKHORN[entry](_UNBALANCED, iters=500)  # balanced: silent
        SINKHORN[entry](_UNBALANCED, warn_tol=None)  # the check turned off
        SINKHORN[entry](_UNBALANCED, warn_tol=0.5)  # a looser threshold
    with pytest.raises(ConvergenceError, match="balanced limit"):
        SINKHORN[entry](_UNBALANCED, strict=True)


@pytest.mark.parametrize("entry", ["engine", "tadiff.torch", "torch.library"])
def test_unrolled_backward_differentiates_the_iterations_run_and_does_not_warn(entry):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SINKHORN[entry](_UNBALANCED, backward="unrolled")


def test_the_threshold_is_relative_to_the_largest_marginal():
    # the same X with marginals 10 times larger: the same relative error, the same decision
    X = np.random.default_rng(1).normal(size=(4, 3, 3)) * 2
    R, _ = sinkhorn_forward(X, iters=12, warn_tol=None)
    relative = abs(R.sum(-2) - 1).max()
    ones = np.ones(3)
    for scale in (1.0, 10.0):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _, seen = sinkhorn_forward(
                X, scale * ones, scale * ones, iters=12, warn_tol=relative * 1.01
            )
        assert seen.residual == pytest.approx(scale * relative, rel=1e-9)
        with pytest.warns(ConvergenceWarning):
            sinkhorn_forward(X, scale * ones, scale * ones, iters=12, warn_tol=relative * 0.99)
    with pytest.raises(InputError, match="warn_tol must be None or a positive number"):
        td.sinkhorn(X, warn_tol=0)


@pytest.mark.parametrize("entry", sorted(FASTH))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_fasth_refuses_non_finite_reflectors_naming_the_index(entry, bad):
    V = np.random.default_rng(2).normal(size=(3, 4))
    V[2, 1] = bad
    with pytest.raises(InputError, match=rf"V\[2, 1\] = {bad}; every entry of V must be finite"):
        FASTH[entry](V, np.eye(4))


@pytest.mark.parametrize("entry", sorted(FASTH))
def test_fasth_refuses_zero_and_overflowing_rows(entry):
    V = np.random.default_rng(3).normal(size=(3, 4))
    V[1] = 0.0
    with pytest.raises(InputError, match="row 1 of V is zero"):
        FASTH[entry](V, np.eye(4))
    V[1] = [1e200, 1.0, 1.0, 1.0]  # finite, but its squared norm is not
    with pytest.raises(InputError, match="squared norm of row 1 of V overflows float64"):
        FASTH[entry](V, np.eye(4))


@pytest.mark.parametrize("entry", sorted(FASTH))
def test_fasth_data_passes_through_like_a_matrix_product(entry):
    rng = np.random.default_rng(4)
    V, X = rng.normal(size=(3, 4)), rng.normal(size=(4, 3))
    X[2, 1] = np.nan  # column 1 of U X reads it, columns 0 and 2 do not
    got = _as_array(FASTH[entry](V, X)).reshape(4, 3)
    want = hh.householder_product(V) @ np.where(np.isnan(X), 0.0, X)
    assert np.isnan(got[:, 1]).all()
    np.testing.assert_allclose(got[:, [0, 2]], want[:, [0, 2]], rtol=0, atol=1e-12)
