"""Custom Functions: ctx API, checks on returned gradients, higher order, once_differentiable."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import AutogradError


class Scale(td.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        ctx.save_for_backward(x)
        return x.data * factor

    @staticmethod
    def backward(ctx, grad):
        (_x,) = ctx.saved_tensors
        return grad * ctx.factor, None


class Cube(td.autograd.Function):
    """Backward written with tadiff ops: differentiable again."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.data**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x


class ExpSavingOutput(td.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = td.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


class SortWithIndices(td.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = np.argsort(x.data)
        ctx.idx = idx
        values, indices = td.tensor(x.data[idx]), td.tensor(idx)
        ctx.mark_non_differentiable(indices)
        return values, indices

    @staticmethod
    def backward(ctx, g_values, g_indices):
        grad = np.zeros_like(g_values.data)
        grad[ctx.idx] = g_values.data
        return td.tensor(grad)


class RawCube(td.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.data**3

    @staticmethod
    @td.autograd.once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad.data * 3 * x.data**2


def test_scale_example_of_the_api_notes():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    y = Scale.apply(x, 2.0)
    assert y.grad_fn.name() == "ScaleBackward"
    assert y.grad_fn.next_functions[1] == (None, 0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 2.0])


def test_needs_input_grad():
    seen = {}

    class Probe(td.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            seen["needs"] = ctx.needs_input_grad
            return a.data + b.data

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    Probe.apply(td.ones(2, requires_grad=True), td.ones(2), 3)
    assert seen["needs"] == (True, False, False)


def test_higher_order_through_function_matches_closed_form():
    x = td.tensor([0.5, -2.0], dtype="float64", requires_grad=True)
    (g,) = td.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.data, 3 * x.data**2)
    (h,) = td.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.data, 6 * x.data)
    assert td.autograd.gradgradcheck(Cube.apply, (x,))


def test_saved_output_has_no_cycle_and_gives_second_derivative():
    x = td.tensor([0.3], dtype="float64", requires_grad=True)
    y = ExpSavingOutput.apply(x)
    (g,) = td.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = td.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.data, np.exp(0.3))


def test_mark_non_differentiable_and_multiple_outputs():
    x = td.tensor([3.0, 1.0, 2.0], requires_grad=True)
    values, indices = SortWithIndices.apply(x)
    assert values.requires_grad and not indices.requires_grad
    assert values.grad_fn.name() == "SortWithIndicesBackward"
    (values * td.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [100.0, 1.0, 10.0])


def test_once_differentiable_first_order_ok_second_order_raises():
    x = td.tensor([2.0], dtype="float64", requires_grad=True)
    y = RawCube.apply(x)
    (g,) = td.autograd.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.data, [12.0])
    with pytest.raises(AutogradError, match="once_differentiable"):
        td.autograd.grad(g.sum(), x)


def test_raw_array_backward_without_decorator_refused_under_create_graph():
    class Raw(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.data**2

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad.data * 2 * x.data

    x = td.tensor([1.0], requires_grad=True)
    Raw.apply(x).sum().backward()  # first order: fine
    np.testing.assert_array_equal(x.grad.data, [2.0])
    with pytest.raises(AutogradError, match=r"RawBackward returned a NumPy array .* create_graph"):
        td.autograd.grad(Raw.apply(x).sum(), x, create_graph=True)


@pytest.mark.parametrize(
    ("returned", "match"),
    [
        (lambda g: g.data.reshape(1, -1), r"RetBackward returned an invalid gradient at index 0 - got \[1, 3\]"),  # noqa: E501
        (lambda g: g.data.astype(np.float64), "RetBackward returned an invalid gradient at index 0 - expected dtype float32"),  # noqa: E501
        (lambda g: (g, g), "returned an incorrect number of gradients"),
        (lambda g: "nope", "returned a str as gradient 0"),
    ],
)  # fmt: skip
def test_wrong_gradients_are_errors_naming_the_function(returned, match):
    class Ret(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.data * 2

        @staticmethod
        def backward(ctx, g):
            return returned(g)

    x = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(AutogradError, match=match):
        Ret.apply(x).sum().backward()


def test_gradient_for_non_tensor_input_must_be_none():
    class Bad(td.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x.data * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(AutogradError, match="different than None at position 1"):
        Bad.apply(td.ones(2, requires_grad=True), 2.0).sum().backward()


def test_saved_input_modified_in_place_is_detected():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Cube.apply(h)
    h.add_(1)
    with pytest.raises(AutogradError, match=r"modified by an inplace operation.*CubeBackward"):
        y.sum().backward()


def test_forward_runs_under_no_grad_and_without_recording_when_not_needed():
    inside = {}

    class Probe(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            inside["mode"] = td.is_grad_enabled()
            return x.data

        @staticmethod
        def backward(ctx, g):
            return g

    out = Probe.apply(td.ones(2))
    assert inside["mode"] is False and out.grad_fn is None and not out.requires_grad
    with td.no_grad():
        assert Probe.apply(td.ones(2, requires_grad=True)).grad_fn is None


def test_non_tensor_outputs_pass_through_and_get_none_gradients():
    seen = {}

    class WithCount(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.data * 2, 7

        @staticmethod
        def backward(ctx, g, g_count):
            seen["g_count"] = g_count
            return g * 2

    x = td.tensor([1.0, 2.0], requires_grad=True)
    y, count = WithCount.apply(x)
    assert count == 7
    y.sum().backward()
    assert seen["g_count"] is None
    np.testing.assert_array_equal(x.grad.data, [2.0, 2.0])


def test_incoming_gradient_has_the_output_dtype_in_a_mixed_dtype_graph():
    seen = {}

    class Probe(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.data * 2

        @staticmethod
        def backward(ctx, g):
            seen["dtype"] = g.dtype
            return g * 2

    x = td.tensor([1.0, 2.0], requires_grad=True)  # float32
    y = Probe.apply(x) * td.tensor([1.0, 1.0], dtype="float64")  # consumer is float64
    y.sum().backward()
    assert seen["dtype"] == np.float32 and x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.data, [2.0, 2.0])
