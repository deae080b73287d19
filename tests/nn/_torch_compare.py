"""Shared check for the functional tests: same float64 inputs in tadiff and torch -> same values
and the same gradients of ``sum(out * upstream)`` for a random upstream gradient."""

import numpy as np

import tadiff as td


def compare_with_torch(
    torch, ours, theirs, arrays, grad=None, rtol=1e-10, atol=1e-12, seed=0, grad_rtol=None
):
    """Run ``ours(*tadiff tensors)`` and ``theirs(*torch tensors)`` and compare.

    Args:
        torch: the torch module (imported lazily by the tests).
        ours, theirs: functions of the tensors.
        arrays: the float64 input arrays.
        grad: which inputs are differentiated (default: all floating ones).
        grad_rtol: the gradients' relative tolerance when torch's own kernel is less exact
            than float64 (default ``rtol``).
    """
    if grad is None:
        grad = [a.dtype.kind == "f" for a in arrays]
    ox = [td.tensor(a.copy(), requires_grad=g) for a, g in zip(arrays, grad, strict=True)]
    tx = [torch.tensor(a.copy(), requires_grad=g) for a, g in zip(arrays, grad, strict=True)]
    got, expected = ours(*ox), theirs(*tx)
    np.testing.assert_allclose(got.data, expected.detach().numpy(), rtol=rtol, atol=atol)
    assert got.shape == tuple(expected.shape)
    if not any(grad):
        return
    upstream = np.random.default_rng(seed).standard_normal(expected.shape)
    (got * td.tensor(upstream)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    for i, (o, t, g) in enumerate(zip(ox, tx, grad, strict=True)):
        if g:
            np.testing.assert_allclose(
                o.grad.data,
                t.grad.numpy(),
                rtol=rtol if grad_rtol is None else grad_rtol,
                atol=atol,
                err_msg=f"input {i}",
            )
