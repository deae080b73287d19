"""Realistic PyTorch programs, written for torch, run unchanged on tadiff.

Each file in ``examples/pytorch_programs`` says ``import torch`` and uses only torch's API (a
GMM log-posterior with a Wishart prior and ``multigammaln``, k-means with Hessian-vector
products, log-sum-exp, a character LSTM that iterates and assigns rows, bundle adjustment over
observations, hand tracking, an RK4 ODE fit, a mass-spring cloth, a ray caster, a CNN training
loop with BatchNorm). The test imports every file twice — as written, and with ``torch``
resolving to ``tadiff`` (``alias.load_program``, nothing global changed) — runs the forward
pass and the program's own gradient computation on the same inputs in both, and compares every
value and gradient.

Tolerances: both libraries evaluate the same formulas in a different order (BLAS kernels,
libm, summation order), so results differ by rounding amplified by each program's depth. Each
tensor is compared norm-wise (relative to its largest entry: entries that cancel keep absolute
errors the size of their terms). Measured while writing this test, the largest deviation over
all programs and outputs was 2.4e-14 in float64 (the ray caster; 1e-15 or less elsewhere) and
1.7e-6 in float32 (float32's rounding is 6e-8); 1e-12 and 1e-4 leave a margin of 40-60x for
other CPUs' BLAS and libm.
"""

import gc
import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

PROGRAMS = Path(__file__).resolve().parents[1] / "examples" / "pytorch_programs"
_spec = importlib.util.spec_from_file_location("program_alias", PROGRAMS / "alias.py")
alias = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(alias)

RTOL = {"float64": 1e-12, "float32": 1e-4}


def _arrays(value):
    """A program's result as a dict of NumPy arrays (one entry for a single tensor)."""
    items = value.items() if isinstance(value, dict) else [("value", value)]
    out = {}
    for key, v in items:
        if hasattr(v, "detach"):  # a torch tensor
            v = v.detach().numpy()
        out[key] = np.array(getattr(v, "data", v), dtype=np.float64)
    return out


def _compare(ours, theirs, rtol, what):
    ours, theirs = _arrays(ours), _arrays(theirs)
    assert ours.keys() == theirs.keys(), what
    for key, want in theirs.items():
        got = ours[key]
        assert got.shape == want.shape, f"{what} {key}: shape {got.shape} vs {want.shape}"
        scale = np.max(np.abs(want)) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale,
                                   err_msg=f"{what} {key}")  # fmt: skip


@pytest.fixture(scope="module", params=alias.NAMES)
def program(request):
    name = request.param
    return (
        name,
        alias.load_program(PROGRAMS / f"{name}.py", "torch"),
        alias.load_program(PROGRAMS / f"{name}.py", "tadiff"),
    )


def test_programs_are_written_for_torch_alone(program):
    name, theirs, ours = program
    source = (PROGRAMS / f"{name}.py").read_text()
    assert "import torch" in source and "tadiff" not in source
    assert theirs.torch.__name__ == "torch" and ours.torch.__name__ == "tadiff"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_forward_and_gradients_agree_with_torch(program, dtype):
    name, theirs, ours = program
    torch.manual_seed(0)
    reference_inputs = theirs.make_inputs("test", dtype)
    inputs = ours.make_inputs("test", dtype)
    _compare(ours.forward(inputs), theirs.forward(reference_inputs), RTOL[dtype], f"{name} forward")
    _compare(ours.gradient(inputs), theirs.gradient(reference_inputs), RTOL[dtype], f"{name} grad")
    # float32 programs stay float32 in both
    if dtype == "float32":
        out = ours.forward(inputs)
        assert str(out.dtype) == "float32", f"{name}: forward gave {out.dtype}"


def test_there_are_enough_programs():
    assert len(alias.NAMES) >= 8
    assert sorted(p.stem for p in PROGRAMS.glob("*.py") if p.stem != "alias") == sorted(alias.NAMES)


def test_programs_leave_no_reference_cycles(program):
    # every object of a recorded graph is freed by reference counting as soon as the graph
    # goes: a cycle would wait for Python's collector, which then walks the whole heap
    name, _, ours = program
    inputs = ours.make_inputs("test", "float64")
    ours.gradient(inputs)  # first calls compile kernels, whose compiler leaves cycles once
    ours.forward(inputs)
    gc.collect()
    gc.disable()
    try:
        ours.gradient(inputs)
        ours.forward(inputs)
        assert gc.collect() == 0, f"{name}: reference cycles left behind"
    finally:
        gc.enable()
