"""Checkpoints: ``td.save``/``td.load`` (npz + JSON, no pickle) and the RNG state.

The values that go into a checkpoint come back with their types and exact values; what cannot be
saved without pickle is an error naming where it sits; a damaged or foreign file is an error.
The resume test trains with every random source tadiff has (random init, dropout, a shuffling
DataLoader), stops, saves, rebuilds everything fresh, loads and continues: the losses and the
final weights equal those of the run that never stopped. Both runs take the same code path in
the same process, so equality is bit for bit.
"""

from __future__ import annotations

import io
import math
import zipfile

import numpy as np
import pytest

import tadiff as td
import tadiff.nn as nn
import tadiff.optim as optim
from tadiff.data import DataLoader, RandomSampler, TensorDataset, random_split
from tadiff.errors import DTypeError, InputError


def _round_trip(value, tmp_path=None):
    if tmp_path is None:
        buffer = io.BytesIO()
        assert td.save(value, buffer) is None
        buffer.seek(0)
        return td.load(buffer)
    path = td.save(value, tmp_path / "checkpoint")
    assert path == tmp_path / "checkpoint"  # exactly there, no suffix added
    return td.load(path)


def _assert_same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            assert type(key) is type(next(k for k in b if k == key))
            _assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, td.Tensor):
        assert a.dtype == b.dtype and a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.data, b.data)
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b)
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_nested_values_come_back_with_their_types(tmp_path):
    value = {
        "model": {"w": td.randn(3, 2), "b": td.zeros(2, dtype=td.float64, requires_grad=True)},
        "state": {0: {"step": 4, "exp_avg": np.arange(6.0).reshape(2, 3)}, 1: {}},
        "numbers": [1, -2**70, 0.1, float("inf"), -float("inf"), float("nan"), 1 + 2j],
        "flags": (True, False, None),
        "names": ["adam", ""],
        "arrays": [
            np.array([True, False]), np.array(["a", "bc"]), np.int8(-3), np.float32(0.5),
            np.zeros((0, 3), dtype=np.int64), np.array(7, dtype=np.uint64),
        ],
        2.5: "a float key", None: "a None key", False: "a bool key",
    }  # fmt: skip
    for where in (None, tmp_path):
        _assert_same(value, _round_trip(value, where))


def test_a_module_is_saved_as_its_state_dict_and_torch_like_arguments_are_accepted():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    buffer = io.BytesIO()
    td.save(model, buffer)
    buffer.seek(0)
    loaded = td.load(buffer, map_location="cpu", weights_only=True)
    assert list(loaded) == list(model.state_dict())
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    fresh.load_state_dict(loaded)
    x = td.randn(5, 3)
    np.testing.assert_array_equal(fresh(x).data, model(x).data)


def _trained_optimizer(kind: str):
    model = nn.Linear(4, 3)
    make = {
        "sgd": lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
        "adam": lambda p: optim.Adam(p, lr=1e-2, amsgrad=True),
        "adamw": lambda p: optim.AdamW(p, lr=1e-2),
        "rmsprop": lambda p: optim.RMSprop(p, lr=1e-2, momentum=0.5, centered=True),
        "adagrad": lambda p: optim.Adagrad(p, lr=1e-2),
    }[kind]
    opt = make(model.parameters())
    for _ in range(3):
        opt.zero_grad()
        model(td.randn(8, 4)).pow(2).sum().backward()
        opt.step()
    return model, opt


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_optimizer_state_round_trips(kind):
    _, opt = _trained_optimizer(kind)
    saved = opt.state_dict()
    loaded = _round_trip(saved)
    _assert_same(saved, loaded)
    _, other = _trained_optimizer(kind)
    other.load_state_dict(loaded)
    _assert_same(other.state_dict(), saved)


SCHEDULERS = {
    "step": lambda o: optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
    "multistep": lambda o: optim.lr_scheduler.MultiStepLR(o, milestones=[1, 3], gamma=0.1),
    "cosine": lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T_max=5),
    "onecycle": lambda o: optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=20),
    "plateau": lambda o: optim.lr_scheduler.ReduceLROnPlateau(o, patience=1),
}


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_state_round_trips_and_resumes_the_schedule(name):
    def run(steps, sched=None, opt=None):
        if opt is None:
            opt = optim.SGD([td.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
            sched = SCHEDULERS[name](opt)
        lrs = []
        for i in range(steps):
            opt.step()
            sched.step(float(10 - i % 3)) if name == "plateau" else sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        return lrs, sched, opt

    whole, _, _ = run(8)
    first, sched, opt = run(4)
    saved = {"scheduler": sched.state_dict(), "optimizer": opt.state_dict()}
    loaded = _round_trip(saved)
    _assert_same(saved, loaded)
    fresh_opt = optim.SGD([td.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    fresh = SCHEDULERS[name](fresh_opt)
    fresh_opt.load_state_dict(loaded["optimizer"])
    fresh.load_state_dict(loaded["scheduler"])
    rest, _, _ = run(4, fresh, fresh_opt)
    assert first + rest == whole


def test_what_needs_pickle_is_an_error_naming_where_it_is():
    with pytest.raises(DTypeError, match=r"obj\['opt'\]\[0\] is a builtins.function"):
        td.save({"opt": [lambda: 0]}, io.BytesIO())
    with pytest.raises(DTypeError, match=r"array obj\['x'\] has dtype object"):
        td.save({"x": np.array([{}, 1], dtype=object)}, io.BytesIO())
    with pytest.raises(DTypeError, match=r"has a key \(1, 2\) of type tuple"):
        td.save({(1, 2): 3}, io.BytesIO())
    with pytest.raises(DTypeError, match=r"is a builtins.set"):
        td.save({1, 2}, io.BytesIO())


def test_foreign_and_damaged_files_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.ckpt"
    bad.write_text("not a zip")
    with pytest.raises(InputError, match=r"is not a tadiff checkpoint or NumPy .npz file"):
        td.load(bad)
    single = tmp_path / "single.npy"
    np.save(single, np.ones(2))
    with pytest.raises(InputError, match="holds a single array"):
        td.load(single)
    with pytest.raises(FileNotFoundError):
        td.load(tmp_path / "missing")
    # an object array is stored pickled by numpy.savez: loading it would unpickle, so it fails
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, x=np.array([{}, 1], dtype=object))
    with pytest.raises(InputError, match="damaged checkpoint"):
        td.load(pickled)
    # a checkpoint whose description names an array it does not hold
    buffer = io.BytesIO()
    td.save({"w": td.ones(2)}, buffer)
    damaged = io.BytesIO()
    with zipfile.ZipFile(buffer) as src, zipfile.ZipFile(damaged, "w") as dst:
        for item in src.infolist():
            if item.filename != "a0.npy":
                dst.writestr(item, src.read(item))
    damaged.seek(0)
    with pytest.raises(InputError, match="refers to an array 'a0' it does not hold"):
        td.load(damaged)


def test_a_plain_npz_archive_loads_as_a_dict_of_arrays(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, weight=np.ones((2, 2)), bias=np.zeros(2))
    loaded = td.load(path)
    assert list(loaded) == ["weight", "bias"] and loaded["weight"].shape == (2, 2)
    assert td.nn.load is td.load and td.nn.save is td.save


# -- the RNG state ----------------------------------------------------------------------------


def _draws(loader) -> list:
    """One draw from every random source tadiff has."""
    w = td.empty(3, 4)
    nn.init.kaiming_uniform_(w)
    return [
        td.rand(3).data, td.randn(2, 2).data, td.randint(0, 100, (4,)).data,
        td.randperm(6).data, td.normal(0.0, 1.0, (3,)).data, td.bernoulli(td.full((5,), 0.5)).data,
        td.multinomial(td.ones(6), 3).data, w.data,
        nn.functional.dropout(td.ones(8), 0.5).data, td.empty(3).uniform_().data,
        td.distributions.Normal(td.zeros(2), td.ones(2)).sample().data,
        td.distributions.Gamma(td.ones(2), td.ones(2)).sample().data,
        np.concatenate([b[0].data for b in loader]),
        np.concatenate([s.indices for s in random_split(range(10), [3, 7])]),
    ]  # fmt: skip


def test_rng_state_replays_every_random_source():
    loader = DataLoader(TensorDataset(td.arange(10.0)), batch_size=4, shuffle=True)
    td.manual_seed(123)
    state = td.get_rng_state()
    assert state.dtype == np.uint8 and state.ndim == 1
    first = _draws(loader)
    second = _draws(loader)
    td.set_rng_state(state)
    again = _draws(loader)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert td.initial_seed() == 123


def test_manual_seed_returns_the_default_generator_and_seed_draws_a_new_one():
    assert td.manual_seed(5) is td.default_generator
    a = td.rand(3).data
    td.manual_seed(5)
    np.testing.assert_array_equal(td.rand(3).data, a)
    s = td.seed()
    assert td.initial_seed() == s
    td.manual_seed(s)
    b = td.rand(3).data
    td.manual_seed(s)
    np.testing.assert_array_equal(td.rand(3).data, b)


def test_a_generator_is_independent_of_the_default_one():
    g = td.Generator().manual_seed(7)
    state = g.get_state()
    td.manual_seed(0)
    default_state = td.get_rng_state()
    x = td.randn(4, generator=g).data
    np.testing.assert_array_equal(td.get_rng_state().data, default_state.data)  # untouched
    g.set_state(state)
    np.testing.assert_array_equal(td.randn(4, generator=g).data, x)
    np.testing.assert_array_equal(td.randn(4, generator=td.Generator().manual_seed(7)).data, x)
    order = list(RandomSampler(range(8), generator=td.Generator().manual_seed(1)))
    assert order == list(RandomSampler(range(8), generator=td.Generator().manual_seed(1)))
    assert sorted(order) == list(range(8))
    loader = DataLoader(range(8), batch_size=8, shuffle=True, generator=g)
    assert sorted(next(iter(loader)).data.tolist()) == list(range(8))
    parts = random_split(range(6), [2, 4], generator=td.Generator().manual_seed(3))
    assert sorted(parts[0].indices + parts[1].indices) == list(range(6))
    assert td.Generator().manual_seed(2).initial_seed() == 2
    assert td.Generator().manual_seed(-1).initial_seed() == 2**64 - 1  # torch's reading


def test_bad_generators_and_states_are_clear_errors():
    # a wrong type is a TypeError, as in torch
    with pytest.raises(DTypeError, match=r"generator must be a tadiff.Generator"):
        td.randn(2, generator=3)
    with pytest.raises(DTypeError, match=r"1-D uint8 tensor.*float32"):
        td.set_rng_state(td.zeros(3))
    with pytest.raises(DTypeError, match="seed must be an int"):
        td.Generator().manual_seed(1.5)
    with pytest.raises(InputError, match="not a generator state"):
        td.set_rng_state(td.tensor(np.frombuffer(b"{}", dtype=np.uint8)))
    with pytest.raises(InputError, match="CPU generators"):
        td.Generator(device="cuda")


# -- resuming a training run ------------------------------------------------------------------

EPOCHS, STOP_AFTER = 4, 2


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 1, 6, 6)).astype(np.float32)
    y = (x.mean(axis=(1, 2, 3)) > 0).astype(np.int64)
    return TensorDataset(td.tensor(x), td.tensor(y))


def _setup():
    """Everything a run builds: random init, dropout, BatchNorm, Adam, a schedule, a shuffling
    loader."""
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Dropout(0.3),
        nn.Linear(64, 2),
    )  # fmt: skip
    opt = optim.Adam(model.parameters(), lr=1e-2)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    loader = DataLoader(_data(), batch_size=8, shuffle=True)
    return model, opt, sched, loader


def _train(model, opt, sched, loader, epochs) -> list[float]:
    losses = []
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(float(loss))
        sched.step()
    return losses


def test_a_run_stopped_saved_and_resumed_continues_bit_identically(tmp_path):
    td.manual_seed(0)
    model, opt, sched, loader = _setup()
    uninterrupted = _train(model, opt, sched, loader, EPOCHS)
    final = {k: v.copy() for k, v in model.state_dict().items()}

    td.manual_seed(0)
    model, opt, sched, loader = _setup()
    before = _train(model, opt, sched, loader, STOP_AFTER)
    td.save(
        {"model": model.state_dict(), "optimizer": opt.state_dict(),
         "scheduler": sched.state_dict(), "epoch": STOP_AFTER, "rng": td.get_rng_state()},
        tmp_path / "checkpoint.tadiff",
    )  # fmt: skip
    del model, opt, sched, loader

    td.manual_seed(999)  # a fresh process would start from another state
    model, opt, sched, loader = _setup()  # drawing fresh random weights
    checkpoint = td.load(tmp_path / "checkpoint.tadiff")
    model.load_state_dict(checkpoint["model"])
    opt.load_state_dict(checkpoint["optimizer"])
    sched.load_state_dict(checkpoint["scheduler"])
    td.set_rng_state(checkpoint["rng"])
    after = _train(model, opt, sched, loader, EPOCHS - checkpoint["epoch"])

    assert len(before + after) == len(uninterrupted) == EPOCHS * 6
    assert before + after == uninterrupted
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value, final[key], err_msg=key)
    assert int(model.state_dict()["1.num_batches_tracked"]) == EPOCHS * 6
