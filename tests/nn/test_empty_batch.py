"""Layers on an empty batch, as torch takes them: convolutions, transposed convolutions,
pooling and batch norm return an empty result of torch's shape, and their weights' gradients
are zeros (a sum over no images). Index functions need every size to be at least 1, so these
layers answer the empty batch themselves; before, they raised a ShapeError, and max pooling
with overlapping windows leaked NumPy's reshape ValueError. Group and instance norm reshaped
with -1, which an empty batch leaves undefined."""

import numpy as np
import pytest

import tadiff as td
import tadiff.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# (name, call(library's functional, x, weight, bias), x shape, weight shape, bias shape); the
# poolings have no weight: their "weight" and "bias" scale and shift the result, so that
# gradients flow to all three
CASES = [
    (
        "conv2d",
        lambda L, x, w, b: L.conv2d(x, w, b, padding=1, stride=2),
        (0, 4, 9, 9),
        (3, 4, 3, 3),
        (3,),
    ),
    ("conv1d", lambda L, x, w, b: L.conv1d(x, w, b, dilation=2), (0, 4, 9), (3, 4, 3), (3,)),
    (
        "conv_transpose2d",
        lambda L, x, w, b: L.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        (0, 4, 5, 5),
        (4, 3, 3, 3),
        (3,),
    ),
    (
        "conv_transpose1d",
        lambda L, x, w, b: L.conv_transpose1d(x, w, b, stride=3),
        (0, 2, 6),
        (2, 5, 4),
        (5,),
    ),
    (
        "avg_pool2d",
        lambda L, x, w, b: L.avg_pool2d(x, 3, 2, 1) * w.sum() + b.sum(),
        (0, 4, 9, 9),
        (2,),
        (2,),
    ),
    (
        "max_pool2d",
        lambda L, x, w, b: L.max_pool2d(x, 3, stride=1) * w.sum() + b.sum(),
        (0, 4, 9, 9),
        (2,),
        (2,),
    ),
    (
        "max_pool2d tiled",
        lambda L, x, w, b: L.max_pool2d(x, 2) * w.sum() + b.sum(),
        (0, 4, 8, 8),
        (2,),
        (2,),
    ),
    (
        "max_pool1d",
        lambda L, x, w, b: L.max_pool1d(x, 3, 2, 1) * w.sum() + b.sum(),
        (0, 4, 9),
        (2,),
        (2,),
    ),
    (
        "batch_norm",
        lambda L, x, w, b: L.batch_norm(x, None, None, w, b, training=True),
        (0, 4, 3, 3),
        (4,),
        (4,),
    ),
    ("group_norm", lambda L, x, w, b: L.group_norm(x, 2, w, b), (0, 4, 3, 3), (4,), (4,)),
    (
        "instance_norm",
        # torch's own instance norm fails on an empty batch given a weight: scaled after it
        lambda L, x, w, b: L.instance_norm(x) * w.sum() + b.sum(),
        (0, 4, 3, 3),
        (4,),
        (4,),
    ),
]


@pytest.mark.parametrize(("name", "call", "xs", "ws", "bs"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_an_empty_batch_gives_torch_s_shape_and_zero_gradients(name, call, xs, ws, bs, dtype):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dtype) for s in (xs, ws, bs)]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    ours = [td.tensor(a, requires_grad=True) for a in arrays]
    want = call(TF, *theirs)
    want.sum().backward()
    got = call(F, *ours)
    got.sum().backward()
    assert got.shape == tuple(want.shape) and got.dtype == getattr(td, dtype)
    for t, d in zip(theirs, ours, strict=True):
        # exact: a sum over no images is 0, and 0 times anything finite is 0
        assert d.grad is not None and d.grad.shape == tuple(t.grad.shape)
        np.testing.assert_array_equal(d.grad.data, t.grad.numpy())


def test_a_batch_norm_layer_on_an_empty_batch_keeps_its_statistics_and_counts_the_batch():
    ours, theirs = td.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    for layer, lib in ((ours, td), (theirs, torch)):
        layer.train()
        layer(lib.ones((4, 3, 2, 2)) * 2.0)  # a real batch first: statistics to keep
        layer(lib.zeros((0, 3, 2, 2)))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(
            getattr(ours, name).data, getattr(theirs, name).numpy(), rtol=1e-6, err_msg=name
        )


def test_an_empty_batch_still_gets_the_geometry_checks():
    # the layer's errors come before the empty batch is answered
    with pytest.raises(td.errors.ShapeError, match="smaller than the dilated kernel"):
        F.conv2d(td.zeros((0, 1, 2, 2)), td.ones((1, 1, 3, 3)))
    with pytest.raises(td.errors.ShapeError, match="smaller than the kernel"):
        F.max_pool2d(td.zeros((0, 1, 2, 2)), 3)


def test_instance_norm_on_an_empty_batch_gives_nan_running_statistics_as_torch():
    # torch averages the statistics of no samples: NaN, not an error
    ours = [td.zeros(3, dtype=td.float64), td.ones(3, dtype=td.float64)]
    theirs = [torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)]
    F.instance_norm(td.zeros((0, 3, 4, 4), dtype=td.float64), *ours, use_input_stats=True)
    TF.instance_norm(torch.zeros((0, 3, 4, 4), dtype=torch.float64), *theirs, use_input_stats=True)
    for mine, want in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(mine.data, want.numpy())
