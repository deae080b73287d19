"""The autograd API of torch 2.x that a PyTorch user reaches for in the first hour, each compared
with torch: ``inference_mode``, ``autograd.functional.vhp``/``hvp``, ``func.grad_and_value``."""

import numpy as np
import pytest

import tadiff as td

torch = pytest.importorskip("torch")


def _both(array):
    return td.tensor(array), torch.tensor(array)


# ---- inference_mode --------------------------------------------------------------------------


@pytest.mark.parametrize("module", [td, torch], ids=["tadiff", "torch"])
def test_inference_mode_forms(module):
    x = module.ones(2, requires_grad=True)
    with module.inference_mode():
        assert module.is_inference_mode_enabled() and not module.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert not module.is_inference_mode_enabled() and module.is_grad_enabled()
    with module.inference_mode(False):
        assert not module.is_inference_mode_enabled() and (x * 2).requires_grad

    @module.inference_mode()
    def called(t):
        return t * 2

    @module.inference_mode
    def bare(t):
        return t * 3

    assert not called(x).requires_grad and not bare(x).requires_grad
    with module.no_grad(), module.inference_mode(False):  # torch's "normal mode": recording
        assert module.is_grad_enabled() and (x * 2).requires_grad
    with module.inference_mode(), module.inference_mode(False):
        assert not module.is_inference_mode_enabled() and (x * 2).requires_grad


def test_inference_mode_restores_after_an_error():
    with pytest.raises(ValueError), td.inference_mode():
        raise ValueError
    assert td.is_grad_enabled() and not td.is_inference_mode_enabled()


def test_inference_mode_on_a_generator_runs_each_step_without_recording():
    x = td.ones(2, requires_grad=True)

    @td.inference_mode()
    def steps():
        yield (x * 2).requires_grad
        yield (x * 3).requires_grad

    assert list(steps()) == [False, False]
    assert (x * 2).requires_grad


# ---- vhp / hvp -------------------------------------------------------------------------------


def _rosenbrock(m):
    def f(x, y):
        return m.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2) * m.exp(y).sum()

    return f


@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_vhp_and_hvp_equal_torch(name):
    rng = np.random.default_rng(0)
    xs, vs = rng.standard_normal(5), rng.standard_normal(5)
    ys, ws = rng.standard_normal(2), rng.standard_normal(2)
    ours_fn = getattr(td.autograd.functional, name)
    theirs_fn = getattr(torch.autograd.functional, name)
    ours = ours_fn(_rosenbrock(td), (td.tensor(xs), td.tensor(ys)), (td.tensor(vs), td.tensor(ws)))
    theirs = theirs_fn(
        _rosenbrock(torch),
        (torch.tensor(xs), torch.tensor(ys)),
        (torch.tensor(vs), torch.tensor(ws)),
    )
    # same formulas in float64 through different summation orders: 1e-12 relative
    np.testing.assert_allclose(ours[0].data, theirs[0].numpy(), rtol=1e-12)
    for a, b in zip(ours[1], theirs[1], strict=True):
        np.testing.assert_allclose(a.data, b.numpy(), rtol=1e-12, atol=1e-12)
    assert not ours[0].requires_grad and not ours[1][0].requires_grad


def test_vhp_is_the_hessian_times_v():
    # brute-force oracle: the explicit Hessian of a cubic times v
    a = np.array([[2.0, 1.0], [1.0, 3.0]])

    def f(x):
        return (x @ td.tensor(a) @ x) * x.sum()

    x0, v = np.array([0.5, -1.0]), np.array([1.0, 2.0])
    hessian = 2 * a * x0.sum() + (2 * a @ x0)[:, None] + (2 * a @ x0)[None, :]
    _, product = td.autograd.functional.vhp(f, td.tensor(x0), td.tensor(v))
    np.testing.assert_allclose(product.data, v @ hessian, rtol=1e-6)  # float32 inputs


def test_vhp_create_graph_and_single_input_without_v():
    x = td.tensor(1.5, dtype=td.float64, requires_grad=True)
    _, product = td.autograd.functional.vhp(lambda t: t**4, x, create_graph=True)
    assert product.item() == pytest.approx(12 * 1.5**2)
    (third,) = td.autograd.grad(product, x)
    assert third.item() == pytest.approx(24 * 1.5)  # d/dx 12 x^2


def test_vhp_errors_like_torch():
    x = td.ones(3)
    with pytest.raises(RuntimeError, match="single element"):
        td.autograd.functional.vhp(lambda t: t * 2, x, td.ones(3))
    with pytest.raises(RuntimeError, match="v can only be None"):
        td.autograd.functional.vhp(lambda t: t.sum(), x)
    with pytest.raises(RuntimeError, match="shape"):
        td.autograd.functional.hvp(lambda t: t.sum(), x, td.ones(2))
    for m in (td, torch):
        with pytest.raises(RuntimeError, match=r"jacobian .* input 0 is independent"):
            m.autograd.functional.vhp(lambda t: (t * 2).sum(), m.ones(3), m.ones(3), strict=True)
        with pytest.raises(RuntimeError, match=r"output .* independent of input 0"):
            m.autograd.functional.vhp(
                lambda a, b: (b**3).sum(), (m.ones(3), m.ones(3)), (m.ones(3),) * 2, strict=True
            )
        with pytest.raises(RuntimeError, match=r"Output 0 .* does not require gradients"):
            m.autograd.functional.vhp(lambda t, m=m: m.ones(()), m.ones(3), m.ones(3), strict=True)
    _, product = td.autograd.functional.vhp(lambda t: (t * 2).sum(), x, td.ones(3))
    np.testing.assert_array_equal(product.data, np.zeros(3))  # linear: a zero Hessian


# ---- func.grad_and_value -----------------------------------------------------------------------


def test_grad_and_value_equals_torch_func():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(3), rng.standard_normal(3)

    def f(m):
        return lambda x, y: ((x * y).sin().sum() + (x**2).sum(), x.detach() * 2)

    for argnums in (0, 1, (0, 1)):
        ours = td.func.grad_and_value(f(td), argnums=argnums, has_aux=True)(
            *_both(a)[:1], td.tensor(b)
        )
        theirs = torch.func.grad_and_value(f(torch), argnums=argnums, has_aux=True)(
            torch.tensor(a), torch.tensor(b)
        )
        (g, (value, aux)), (h, (reference, reference_aux)) = ours, theirs
        gs, hs = (g, h) if isinstance(argnums, tuple) else ((g,), (h,))
        for x, y in zip(gs, hs, strict=True):
            np.testing.assert_allclose(x.data, y.numpy(), rtol=1e-14)
        np.testing.assert_allclose(value.item(), reference.item(), rtol=1e-14)
        np.testing.assert_allclose(aux.data, reference_aux.numpy(), rtol=1e-14)
    g, v = td.func.grad_and_value(lambda x: (x**3).sum())(td.tensor([2.0]))
    assert g.tolist() == [12.0] and v.item() == 8.0


# ---- clamp with Tensor bounds, linalg.solve broadcasting B ---------------------------------------


def test_clamp_with_tensor_bounds_equals_torch():
    rng = np.random.default_rng(3)
    x, lo, hi = rng.standard_normal((3, 4)), rng.standard_normal(4) - 0.5, rng.standard_normal(4)
    lo[0] = hi[0] + 1.0  # min above max: max wins, and gets the gradient
    for kwargs in ({"min": lo, "max": hi}, {"min": lo}, {"max": hi}):
        ours = {k: td.tensor(v, requires_grad=True) for k, v in (("x", x), *kwargs.items())}
        theirs = {k: torch.tensor(v, requires_grad=True) for k, v in (("x", x), *kwargs.items())}
        out = td.clamp(ours["x"], **{k: ours[k] for k in kwargs})
        ref = torch.clamp(theirs["x"], **{k: theirs[k] for k in kwargs})
        np.testing.assert_array_equal(out.data, ref.detach().numpy())
        assert out.grad_fn.name() == type(ref.grad_fn).__name__ == "ClampBackward0"
        g = rng.standard_normal(x.shape)
        out.backward(td.tensor(g))
        ref.backward(torch.tensor(g))
        for k in ours:
            np.testing.assert_array_equal(ours[k].grad.data, theirs[k].grad.numpy())
    assert td.clamp_min(td.ones(2, requires_grad=True), td.zeros(2)).grad_fn.name() == (
        "ClampMinBackward1"
    )
    # the result keeps x's dtype, as torch's
    assert td.clamp(td.ones(2), min=td.zeros(2, dtype=td.float64)).dtype == np.float32


@pytest.mark.parametrize("b_shape", [(3, 2), (3,), (4, 3), (4, 3, 2), (1, 3, 2), (2, 4, 3, 2)])
def test_solve_broadcasts_b_like_torch(b_shape):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 3, 3)) + 3 * np.eye(3)  # well conditioned: torch is an oracle
    b = rng.standard_normal(b_shape)
    x, y = td.tensor(a, requires_grad=True), td.tensor(b, requires_grad=True)
    s, t = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, ref = td.linalg.solve(x, y), torch.linalg.solve(s, t)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(x.grad.data, s.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y.grad.data, t.grad.numpy(), rtol=1e-12, atol=1e-12)


# ---- autograd.Function: setup_context, mark_dirty; post-accumulate-grad hooks ----------------


def _functions(m):
    class MulAdd(m.autograd.Function):
        @staticmethod
        def forward(x, w, shift):  # torch 2's style: no ctx here...
            return x * w + shift

        @staticmethod
        def setup_context(ctx, inputs, output):  # ...the context is set up apart
            x, w, shift = inputs
            ctx.save_for_backward(x, w, output)
            ctx.shift = shift

        @staticmethod
        def backward(ctx, g):
            x, w, out = ctx.saved_tensors
            assert out.tolist() == (x * w + ctx.shift).tolist()  # the output was saved
            return g * w, g * x, None

    class AddOneInPlace(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with m.no_grad():
                x.add_(1)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)  # the modified tensor may be saved
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            assert x.tolist() == [3.0, 5.0]  # the value after the in-place change
            return g * 1

    return MulAdd, AddOneInPlace


@pytest.mark.parametrize("module", [td, torch], ids=["tadiff", "torch"])
def test_function_with_setup_context(module):
    MulAdd, _ = _functions(module)
    x = module.tensor([1.0, 2.0], requires_grad=True)
    w = module.tensor([3.0, 4.0], requires_grad=True)
    y = MulAdd.apply(x, w, 0.5)
    assert type(y.grad_fn).__name__ == "MulAddBackward"
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 4.0] and w.grad.tolist() == [1.0, 2.0]
    assert y.tolist() == [3.5, 8.5]


@pytest.mark.parametrize("module", [td, torch], ids=["tadiff", "torch"])
def test_mark_dirty(module):
    _, AddOneInPlace = _functions(module)
    x = module.tensor([1.0, 2.0], requires_grad=True)
    z = x * 2
    saved_by_mul = z * z  # saves z's current value
    version = z._version
    out = AddOneInPlace.apply(z)
    assert out is z and z._version > version and z.tolist() == [3.0, 5.0]
    assert type(z.grad_fn).__name__ == "AddOneInPlaceBackward"
    (z * z).sum().backward(retain_graph=True)
    assert x.grad.tolist() == [12.0, 20.0]  # d/dx (2x + 1)^2 = 4 (2x + 1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saved_by_mul.sum().backward()
    leaf = module.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        AddOneInPlace.apply(leaf)


@pytest.mark.parametrize("module", [td, torch], ids=["tadiff", "torch"])
def test_post_accumulate_grad_hook(module):
    w = module.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (w * 3).sum().backward()
    (w * 2).sum().backward()
    assert seen == [[3.0, 3.0], [5.0, 5.0]]  # after accumulation, the tensor itself
    handle.remove()
    (w * 1).sum().backward()
    assert len(seen) == 2
    module.autograd.grad((w * 5).sum(), w)  # grad() accumulates nothing: no hook
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        module.ones(2).register_post_accumulate_grad_hook(lambda t: None)


def test_post_accumulate_grad_hook_fuses_an_optimizer_step():
    # torch's documented use: an SGD step per parameter, inside backward
    w = td.tensor([1.0, 2.0], requires_grad=True)

    def step(p):
        with td.no_grad():
            p -= 0.1 * p.grad
        p.grad = None

    w.register_post_accumulate_grad_hook(step)
    (w * w).sum().backward()
    np.testing.assert_allclose(w.data, [0.8, 1.6])  # w - 0.1 * 2w
    assert w.grad is None
