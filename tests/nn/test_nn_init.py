"""Initializers against torch's formulas (gains, fans) and by the statistics of their draws."""

import math

import numpy as np
import pytest

import tadiff as td
from tadiff import nn
from tadiff.errors import InputError, ShapeError
from tadiff.nn import init

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("name", "param"),
    [
        ("linear", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("selu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("conv2d", None),
    ],
)
def test_gain_matches_torch(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(
        torch.nn.init.calculate_gain(name, param), rel=1e-15
    )


def _draws(shape, fill):
    p = nn.Parameter(np.zeros(shape))
    fill(p)
    return p.data


@pytest.mark.parametrize("shape", [(300, 200), (64, 8, 3, 3)])
def test_uniform_schemes_have_torch_bounds(shape):
    t = torch.empty(shape)
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(t)
    cases = [
        (init.xavier_uniform_, math.sqrt(6 / (fan_in + fan_out))),
        (lambda p: init.kaiming_uniform_(p, nonlinearity="relu"), math.sqrt(6 / fan_in)),
        (lambda p: init.kaiming_uniform_(p, a=math.sqrt(5)), 1 / math.sqrt(fan_in)),
        (
            lambda p: init.kaiming_uniform_(p, mode="fan_out", nonlinearity="tanh"),
            5 / 3 * math.sqrt(3 / fan_out),
        ),
    ]
    for fill, bound in cases:
        data = _draws(shape, fill)
        assert np.abs(data).max() <= bound
        # n uniform draws on [-b, b]: variance b^2/3 within a few standard errors
        assert data.var() == pytest.approx(bound**2 / 3, rel=0.05)


def test_normal_schemes_have_torch_std():
    shape = (400, 300)
    fan_in, fan_out = 300, 400
    for fill, std in [
        (init.xavier_normal_, math.sqrt(2 / (fan_in + fan_out))),
        (lambda p: init.kaiming_normal_(p, nonlinearity="relu"), math.sqrt(2 / fan_in)),
        (lambda p: init.normal_(p, 1.5, 0.25), 0.25),
    ]:
        data = _draws(shape, fill)
        assert data.std() == pytest.approx(std, rel=0.02)
    shifted = _draws(shape, lambda p: init.normal_(p, 1.5, 0.25))
    assert shifted.mean() == pytest.approx(1.5, abs=0.01)


def test_constant_fills_and_seeded_reproducibility():
    assert (_draws((2, 3), init.ones_) == 1).all()
    assert (_draws((2, 3), lambda p: init.constant_(p, 0.5)) == 0.5).all()
    td.manual_seed(11)
    first = _draws((5, 5), init.xavier_uniform_)
    td.manual_seed(11)
    np.testing.assert_array_equal(first, _draws((5, 5), init.xavier_uniform_))
    assert _draws((3,), init.uniform_).dtype == np.float64  # the tensor keeps its dtype


def test_init_errors():
    with pytest.raises(ShapeError, match=r"at least 2 dims, got shape \(3,\)"):
        init.xavier_uniform_(nn.Parameter(np.zeros(3)))
    with pytest.raises(InputError, match="unsupported nonlinearity 'swish'"):
        init.calculate_gain("swish")
    with pytest.raises(InputError, match="mode='fan_avg'"):
        init.kaiming_normal_(nn.Parameter(np.zeros((2, 2))), mode="fan_avg")


def test_zero_element_tensors_are_left_alone_and_linear_handles_them():
    empty = nn.Parameter(np.zeros((3, 0)))
    for fill in (init.xavier_uniform_, init.xavier_normal_, init.kaiming_uniform_):
        assert fill(empty) is empty
    layer = nn.Linear(0, 3)
    out = layer(td.ones(2, 0))
    np.testing.assert_array_equal(out.data, np.broadcast_to(layer.bias.data, (2, 3)))
