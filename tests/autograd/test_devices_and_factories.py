"""Device-agnostic PyTorch code runs on tadiff: ``device=`` on factories and layers, devices as
objects, ``.to``/``.cpu``/``.cuda``, default dtypes, ``from_numpy``/``as_tensor``/DLPack, torch's
legacy ``Tensor(2, 3)`` — each compared with what torch does."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import DeviceError

torch = pytest.importorskip("torch")

FACTORIES = [
    ("zeros", lambda m, **kw: m.zeros(2, 3, **kw)),
    ("ones", lambda m, **kw: m.ones((2, 3), **kw)),
    ("empty", lambda m, **kw: m.empty(2, **kw)),
    ("full", lambda m, **kw: m.full((2,), 1.5, **kw)),
    ("arange", lambda m, **kw: m.arange(0, 5, 2, **kw)),
    ("linspace", lambda m, **kw: m.linspace(0, 1, 5, **kw)),
    ("eye", lambda m, **kw: m.eye(3, **kw)),
    ("rand", lambda m, **kw: m.rand(2, **kw)),
    ("randn", lambda m, **kw: m.randn(2, **kw)),
    ("randint", lambda m, **kw: m.randint(0, 5, (3,), **kw)),
    ("randperm", lambda m, **kw: m.randperm(4, **kw)),
    ("tensor", lambda m, **kw: m.tensor([1.0, 2.0], **kw)),
    ("as_tensor", lambda m, **kw: m.as_tensor([1.0, 2.0], **kw)),
    ("zeros_like", lambda m, **kw: m.zeros_like(m.ones(2), **kw)),
    ("ones_like", lambda m, **kw: m.ones_like(m.ones(2), **kw)),
    ("full_like", lambda m, **kw: m.full_like(m.ones(2), 3.0, **kw)),
    ("rand_like", lambda m, **kw: m.rand_like(m.ones(2), **kw)),
    ("randn_like", lambda m, **kw: m.randn_like(m.ones(2), **kw)),
    ("empty_like", lambda m, **kw: m.empty_like(m.ones(2), **kw)),
    ("tril_indices", lambda m, **kw: m.tril_indices(3, 3, **kw)),
    ("triu_indices", lambda m, **kw: m.triu_indices(3, 3, **kw)),
    ("new_zeros", lambda m, **kw: m.ones(2).new_zeros((2, 2), **kw)),
    ("new_ones", lambda m, **kw: m.ones(2).new_ones(3, **kw)),
    ("new_full", lambda m, **kw: m.ones(2).new_full((2,), 4.0, **kw)),
    ("new_tensor", lambda m, **kw: m.ones(2).new_tensor([1.0], **kw)),
]


@pytest.mark.parametrize(("name", "make"), FACTORIES, ids=[n for n, _ in FACTORIES])
def test_every_factory_takes_device_as_torch_does(name, make):
    for device in ("cpu", "cpu:0", td.device("cpu"), torch.device("cpu"), None):
        ours = make(td, device=device)
        theirs = make(torch, device=str(device) if device is not None else None)
        assert ours.device == "cpu" and ours.device.type == theirs.device.type == "cpu"
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    # a CPU build of torch refuses CUDA with an AssertionError; tadiff's DeviceError is one too
    with pytest.raises(AssertionError):
        make(torch, device="cuda")
    with pytest.raises(AssertionError, match="no 'cuda:1' device"):
        make(td, device="cuda:1")
    with pytest.raises(RuntimeError, match=r"tadiff.torch"):
        make(td, device=torch.device("cuda"))


def test_device_objects_parse_print_and_compare_like_torch():
    for text in ("cpu", "cuda", "cuda:1", "mps", "meta"):
        ours, theirs = td.device(text), torch.device(text)
        assert (ours.type, ours.index) == (theirs.type, theirs.index)
        assert str(ours) == str(theirs) and repr(ours) == repr(theirs)
    assert td.device("cuda", 2) == td.device("cuda:2") and hash(td.device("cpu")) == hash(
        td.device("cpu")
    )
    assert td.device("cpu") != td.device("cpu:0")  # as torch: an index makes another device
    assert td.device(torch.device("cuda:3")) == td.device("cuda:3")
    for bad in ("foo", "cuda:x", "cuda:-1"):
        with pytest.raises(RuntimeError):
            torch.device(bad)
        with pytest.raises(RuntimeError):
            td.device(bad)


def test_tensor_device_methods():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    assert x.device == td.device("cpu") and str(x.device) == "cpu" and x.is_cuda is False
    assert x.cpu() is x
    for bad in (lambda: x.cuda(), lambda: x.to("cuda"), lambda: x.to(0), lambda: x.to("mps")):
        with pytest.raises(DeviceError, match="NumPy on the CPU"):
            bad()
    y = x.to("cpu", td.float64)
    assert y.dtype == np.float64 and y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0])
    assert x.to(device="cpu") is x and x.to(td.device("cpu"), dtype="float32") is x
    copied = x.to("cpu", copy=True)
    assert copied is not x and copied.data is not x.data and copied.grad_fn is not None
    assert x.to(td.zeros(1, dtype=td.float64)).dtype == np.float64
    with pytest.raises(TypeError, match="unexpected keyword argument 'devcie'"):
        x.to(devcie="cpu")
    with pytest.raises(TypeError, match="list"):
        x.to([1])


def test_module_to_half_float_double_and_devices():
    model = td.nn.Sequential(td.nn.Linear(2, 3), td.nn.BatchNorm1d(3))
    assert model.to("cpu") is model and model[0].weight.dtype == np.float32
    model.to("cpu", td.float64)
    assert {p.dtype for p in model.parameters()} == {np.dtype(np.float64)}
    assert model[1].running_mean.dtype == np.float64
    model.half()
    assert {p.dtype for p in model.parameters()} == {np.dtype(np.float16)}
    model.float()
    assert model[0].weight.dtype == np.float32
    model.to(dtype=td.float64, device=td.device("cpu"))
    assert model[0].bias.dtype == np.float64
    model.to(td.zeros(1, dtype=td.float32))
    assert model[0].bias.dtype == np.float32
    assert model.cpu() is model
    with pytest.raises(DeviceError):
        model.cuda()
    with pytest.raises(AssertionError):
        torch.nn.Linear(2, 2).cuda()  # what a CPU build of torch does too
    with pytest.raises(TypeError, match="floating"):
        model.to(td.int64)


def test_layers_take_device_and_default_dtype():
    for make in (
        lambda m, **kw: m.nn.Linear(3, 2, **kw),
        lambda m, **kw: m.nn.Conv2d(1, 2, 3, **kw),
        lambda m, **kw: m.nn.BatchNorm2d(2, **kw),
        lambda m, **kw: m.nn.LSTM(3, 4, **kw),
        lambda m, **kw: m.nn.GRUCell(3, 4, **kw),
        lambda m, **kw: m.nn.LayerNorm(3, **kw),
        lambda m, **kw: m.nn.Embedding(5, 3, **kw),
        lambda m, **kw: m.nn.MultiheadAttention(4, 2, **kw),
    ):
        ours, theirs = make(td, device="cpu"), make(torch, device="cpu")
        assert [str(p.dtype) for p in ours.parameters()] == [
            str(p.dtype).removeprefix("torch.") for p in theirs.parameters()
        ]
        with pytest.raises(DeviceError):
            make(td, device="cuda")
        assert make(td, dtype=td.float64).parameters().__next__().dtype == np.float64


@pytest.fixture
def default_float64():
    td.set_default_dtype(td.float64)
    torch.set_default_dtype(torch.float64)
    yield
    td.set_default_dtype(td.float32)
    torch.set_default_dtype(torch.float32)


def test_set_default_dtype_reaches_every_float_default(default_float64):
    cases = [
        lambda m: m.tensor([1.5]),
        lambda m: m.zeros(2),
        lambda m: m.arange(0.0, 1.0, 0.5),
        lambda m: m.full((2,), 1.5),
        lambda m: m.randn(2),
        lambda m: m.tensor([1, 2]) * 0.5,
        lambda m: m.exp(m.tensor([1, 2])),
        lambda m: m.Tensor(2, 2),
        lambda m: m.nn.Linear(2, 2).weight,
        lambda m: m.nn.LSTMCell(2, 2).weight_ih,
    ]
    for case in cases:
        assert str(case(td).dtype) == str(case(torch).dtype).removeprefix("torch.") == "float64"
    assert td.get_default_dtype() == np.float64
    assert td.tensor([1, 2]).dtype == np.int64  # integers keep int64
    with pytest.raises(TypeError, match="floating-point"):
        torch.set_default_dtype(torch.int64)
    with pytest.raises(TypeError, match="floating-point"):
        td.set_default_dtype(td.int64)


def test_cuda_module_answers_like_a_cpu_build_of_torch():
    assert td.cuda.is_available() is False and td.cuda.device_count() == 0
    td.cuda.manual_seed(0)
    td.cuda.manual_seed_all(0)
    device = td.device("cuda" if td.cuda.is_available() else "cpu")
    assert td.zeros(1, device=device).device == device
    with pytest.raises(AssertionError):
        td.cuda.synchronize()


def test_from_numpy_shares_memory_and_checks_its_argument():
    a = np.arange(3.0)
    t, u = td.from_numpy(a), torch.from_numpy(a)
    a[0] = 7.0
    assert t[0].item() == u[0].item() == 7.0 and t.dtype == np.float64
    for bad in ([1.0, 2.0], 3.0):
        with pytest.raises(TypeError, match=r"expected np.ndarray"):
            torch.from_numpy(bad)
        with pytest.raises(TypeError, match=r"expected np.ndarray \(got (list|float)\)"):
            td.from_numpy(bad)


def test_as_tensor_shares_where_torch_shares():
    a = np.ones(3)
    assert td.as_tensor(a).data is a  # same dtype: no copy
    converted = td.as_tensor(a, dtype=td.float32)
    a[1] = 5.0
    assert converted[1].item() == 1.0 and converted.dtype == np.float32
    x = td.tensor([1.0], requires_grad=True)
    assert td.as_tensor(x) is x
    assert td.as_tensor(x, dtype=td.float64).grad_fn is not None  # stays in the graph, as torch
    assert td.as_tensor([1, 2]).dtype == np.int64 and td.as_tensor(2.5).dtype == np.float32
    shared = torch.arange(3.0)
    ours = td.as_tensor(shared)
    shared[0] = 9.0
    assert ours[0].item() == 9.0


def test_dlpack_both_ways():
    x = td.tensor([1.0, 2.0, 3.0])
    t = torch.from_dlpack(x)
    x.data[0] = 4.0
    assert t[0].item() == 4.0  # torch reads tadiff's memory
    np.testing.assert_array_equal(torch.as_tensor(x).numpy(), x.data)
    np.testing.assert_array_equal(np.from_dlpack(x), x.data)
    back = td.from_dlpack(torch.ones(2, dtype=torch.float64))
    assert back.dtype == np.float64 and back.tolist() == [1.0, 1.0]
    with pytest.raises(BufferError, match="require gradient"):
        torch.from_dlpack(torch.ones(2, requires_grad=True))
    with pytest.raises(BufferError, match="require gradient"):
        torch.from_dlpack(td.ones(2, requires_grad=True))
    with pytest.raises(BufferError, match=r"detach\(\)"):
        td.from_dlpack(torch.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match=r"__dlpack__.*list"):
        td.from_dlpack([1.0])


def test_errors_name_foreign_types_and_say_how_to_convert():
    with pytest.raises(TypeError) as caught:
        td.tensor([1.0]) + torch.ones(1)
    message = str(caught.value)
    assert "got torch.Tensor" in message and "tadiff.from_dlpack" in message
    with pytest.raises(TypeError, match=r"got torch.Tensor"):
        td.exp(torch.ones(1))
    with pytest.raises(TypeError, match="got str"):
        td.tensor([1.0]) * "a"


def test_legacy_tensor_constructor():
    for args in [(2, 3), ([1, 2],), ([[1.5], [2.0]],), ()]:
        ours, theirs = td.Tensor(*args), torch.Tensor(*args)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype == np.float32
        if args and isinstance(args[0], list):
            np.testing.assert_array_equal(ours.data, theirs.numpy())
    assert td.Tensor(2, 3, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match="sizes must be ints"):
        td.Tensor(2, 3.0)
    with pytest.raises(TypeError, match=r"requires_grad=... by keyword"):
        td.Tensor(np.zeros(2), True)
    with pytest.raises(RuntimeError, match="negative dimension"):
        td.Tensor(2, -1)


@pytest.mark.parametrize(("row", "col", "offset"), [(3, 3, 0), (3, 3, -1), (4, 2, 1), (2, 5, -3)])
def test_triangle_indices_equal_torch(row, col, offset):
    for name in ("tril_indices", "triu_indices"):
        ours = getattr(td, name)(row, col, offset)
        theirs = getattr(torch, name)(row, col, offset)
        np.testing.assert_array_equal(ours.data, theirs.numpy())
        assert ours.dtype == np.int64


def test_small_predicates_and_limits():
    x = td.ones(2, 3)
    assert td.is_tensor(x) and not td.is_tensor(np.ones(2))
    assert td.is_floating_point(x) and not td.is_floating_point(td.arange(3))
    assert td.numel(x) == torch.numel(torch.ones(2, 3)) == 6
    assert td.finfo(td.float32).eps == torch.finfo(torch.float32).eps
    assert td.iinfo(td.int64).max == torch.iinfo(torch.int64).max
