"""The Triton backend against the reference interpreter on the whole derivation corpus.

On CPU the kernels run in Triton's interpreter (small sizes), which must be switched on before
triton is first imported; if another test module imported triton earlier in this session, this
file re-runs itself in a subprocess (as tests/torch/test_sinkhorn_triton.py does).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
_IN_PROCESS = torch.cuda.is_available() or "triton" not in sys.modules
if not torch.cuda.is_available() and _IN_PROCESS:
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")
_here = pytest.mark.skipif(not _IN_PROCESS, reason="run by test_in_fresh_interpreter")


@pytest.mark.skipif(_IN_PROCESS, reason="triton can run in this process")
def test_in_fresh_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    args = [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]


from test_derive import CORPUS  # noqa: E402

from tadiff.index import define  # noqa: E402
from tadiff.index.compile import kernel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # masked lanes compute junk


@_here
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize(("source", "shapes"), CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_forward_and_gradients_match_interpreter(source, shapes, dtype):
    rng = np.random.default_rng(0)
    f = define(source)
    arrays = {n: rng.uniform(0.3, 0.9, size=shapes[n]) for n in f.args}
    g = rng.normal(size=f(**arrays).shape)
    for fn, args in [(f, arrays)] + [(f.grad(n), {**arrays, f.grad_name: g}) for n in f.args]:
        typed = {n: args[n].astype(dtype) for n in fn.args}
        got = kernel(fn, {n: a.shape for n, a in typed.items()}, dtype, "triton")(typed)
        reference = fn(**{n: a.astype(np.float64) for n, a in typed.items()})
        assert got.dtype == dtype and got.shape == reference.shape
        tol = 1e-12 if dtype == np.float64 else 2e-5
        np.testing.assert_allclose(got, reference, rtol=tol, atol=tol, err_msg=str(fn))


@_here
def test_block_boundaries_and_strided_window():
    # more output elements than one block, and per-element windows that differ inside a block
    f = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(2, 3, 301)), rng.normal(size=(2, 3, 3))
    y = f(x=x, w=w)
    dy = rng.normal(size=y.shape)
    args = {"x": x, "w": w, "dy": dy}
    grad = f.grad("x")
    got = kernel(grad, {k: v.shape for k, v in args.items()}, np.float64, "triton")(args)
    np.testing.assert_allclose(got, grad.evaluate(args, backend="numpy"), rtol=1e-12, atol=1e-12)
    assert "tl.program_id(0)" in grad.source("triton")
