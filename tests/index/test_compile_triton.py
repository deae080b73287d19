"""The Triton backend against the reference interpreter on the whole derivation corpus.

On CPU the kernels run in Triton's interpreter (small sizes): tests/conftest.py switches it on
before triton is first imported.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_derive import CORPUS  # noqa: E402

from tadiff.index import define  # noqa: E402
from tadiff.index.compile import kernel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # masked lanes compute junk


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize(("source", "shapes"), CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_forward_and_gradients_match_interpreter(source, shapes, dtype):
    rng = np.random.default_rng(0)
    f = define(source)
    arrays = {n: rng.uniform(0.3, 0.9, size=shapes[n]) for n in f.args}
    g = rng.normal(size=f.reference(**arrays).shape)
    for fn, args in [(f, arrays)] + [(f.grad(n), {**arrays, f.grad_name: g}) for n in f.args]:
        typed = {n: args[n].astype(dtype) for n in fn.args}
        got = kernel(fn, {n: a.shape for n, a in typed.items()}, dtype, "triton")(typed)
        reference = fn.reference(**{n: a.astype(np.float64) for n, a in typed.items()})
        assert got.dtype == dtype and got.shape == reference.shape
        tol = 1e-12 if dtype == np.float64 else 2e-5
        np.testing.assert_allclose(got, reference, rtol=tol, atol=tol, err_msg=str(fn))


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


def test_programs_with_temporaries_and_the_saved_forward_run_on_triton():
    # the report's example: d/dd is two stages (a temporary over i, then a window sum over it)
    # and reads the saved forward output; every stage is a Triton program
    f = define("f[i,j] = exp(-sum[k]((a[i,k]+b[j,k])**2 * c[i,i] + d[i+k]**3))")
    rng = np.random.default_rng(3)
    arrays = {
        "a": rng.uniform(0.2, 0.6, (5, 3)),
        "b": rng.uniform(0.2, 0.6, (4, 3)),
        "c": rng.uniform(0.2, 0.6, (5, 5)),
        "d": rng.uniform(0.2, 0.6, (7,)),
    }
    y = f.reference(**arrays)
    df = rng.normal(size=y.shape)
    grad = f.grad("d")
    shapes = {**{n: a.shape for n, a in arrays.items()}, "df": df.shape}
    k = kernel(grad, shapes, np.float64, "triton", {"f": (f, y.shape)})
    assert len(k.program.stages) == 2 and k.program.saved == ("f",)
    assert k.stage_backends == ["triton", "triton"]
    got = k({**arrays, "df": df, "f": y})
    np.testing.assert_allclose(got, grad.reference(**arrays, df=df), rtol=1e-12, atol=1e-12)


def test_torch_define_on_triton_reads_the_saved_output():
    import tadiff.torch as tdt

    op = tdt.define("K[i,j] = exp(-sum[q]((a[i,q]-b[j,q])**2))", backend="triton")
    rng = np.random.default_rng(4)
    a = torch.tensor(rng.normal(size=(5, 3)), requires_grad=True)
    b = torch.tensor(rng.normal(size=(4, 3)), requires_grad=True)
    op(a=a, b=b).sum().backward()
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    torch.exp(-((a2[:, None] - b2[None]) ** 2).sum(-1)).sum().backward()
    torch.testing.assert_close(a.grad, a2.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(b.grad, b2.grad, rtol=1e-12, atol=1e-12)
