"""Module hooks (forward pre, forward, full backward) against torch's."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import InputError

torch = pytest.importorskip("torch")

W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])


def _model(lib):
    lin = lib.nn.Linear(3, 2, bias=False, dtype=lib.float64)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(W))
    return lin


def _run(lib, x_requires_grad):
    lin, log = _model(lib), []
    lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    lin.register_forward_hook(lambda m, args, out: out + 1)

    def arr(g):
        return None if g is None else np.asarray(g.detach().numpy() if lib is torch else g.data)

    def backward_hook(m, grad_input, grad_output):
        log.append(([arr(g) for g in grad_input], [arr(g) for g in grad_output]))
        if grad_input[0] is not None:
            return (grad_input[0] * 10,)
        return None

    lin.register_full_backward_hook(backward_hook)
    x = lib.tensor(X, requires_grad=x_requires_grad)
    out = lin(x)
    (out * lib.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]))).sum().backward()
    grads = {"weight": lin.weight.grad, "x": x.grad}
    as_np = {
        k: None if v is None else np.asarray(v.numpy() if lib is torch else v.data)
        for k, v in grads.items()
    }
    value = out.detach().numpy() if lib is torch else out.data
    return value, as_np, log


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # torch's note, same rule
@pytest.mark.parametrize("x_requires_grad", [True, False])
def test_hooks_match_torch(x_requires_grad):
    ours, theirs = _run(td, x_requires_grad), _run(torch, x_requires_grad)
    np.testing.assert_allclose(ours[0], theirs[0])
    for k in ("weight", "x"):
        if theirs[1][k] is None:
            assert ours[1][k] is None
        else:
            np.testing.assert_allclose(ours[1][k], theirs[1][k])
    assert len(ours[2]) == len(theirs[2]) == 1
    (gi, go), (tgi, tgo) = ours[2][0], theirs[2][0]
    assert [g is None for g in gi] == [g is None for g in tgi]
    for a, b in zip(gi + go, tgi + tgo, strict=True):
        if a is not None:
            np.testing.assert_allclose(a, b)


def test_remove_and_order_and_errors():
    lin, calls = _model(td), []
    h1 = lin.register_forward_hook(lambda m, a, o: calls.append(1))
    lin.register_forward_hook(lambda m, a, o: calls.append(2))
    lin(td.tensor(X))
    h1.remove()
    h1.remove()  # idempotent
    lin(td.tensor(X))
    assert calls == [1, 2, 2]
    with pytest.raises(InputError, match="must be callable"):
        lin.register_forward_hook(3)
    seq = td.nn.Sequential(_model(td), td.nn.ReLU())
    seen = []
    seq[0].register_forward_hook(lambda m, a, o: seen.append(o.shape))
    seq(td.tensor(X))
    assert seen == [(2, 2)]
