"""Fit a Gaussian process's hyperparameters by gradient descent through a Cholesky factorisation.

The data are generated here: ``y = sin(3x) + 0.3 x`` plus Gaussian noise of standard deviation
0.1 at 80 random points of ``[-2, 2]``. The model is a GP with a squared-exponential kernel
``k(a, b) = s² exp(-(a - b)² / 2ℓ²)`` plus noise variance ``σ²`` on the diagonal. Its negative
log marginal likelihood

    NLL = ½ yᵀ K⁻¹ y + ½ log det K + (n/2) log 2π,   K = L Lᵀ,

is computed with ``td.linalg.cholesky`` and ``td.linalg.solve_triangular`` (``½ log det K`` is
``Σ log L_ii``), and its gradient wrt ``(log ℓ, log s, log σ)`` comes from the derivatives of the
factorisation. Before training the script checks that gradient against PyTorch's (when torch is
installed) and against central differences; it then runs 150 Adam steps and reports the
learned noise level and the test error of the posterior mean. It exits with status 1 if the
gradient checks fail, the learned noise is off by more than a factor 1.5, or the test RMSE is
above 0.15.

Usage: ``python examples/gaussian_process.py [--steps 150] [--seed 0]``
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

import tadiff as td
import tadiff.optim as optim
from tadiff.utils.progress import progress

TRUE_NOISE = 0.1


def make_data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(-2.0, 2.0, n)
    return x, np.sin(3 * x) + 0.3 * x + rng.normal(0.0, TRUE_NOISE, n)


def kernel(lib, a, b, log_len, log_scale):
    """Squared-exponential covariance between points ``a`` (n,) and ``b`` (m,): (n, m)."""
    d = a[:, None] - b[None, :]
    return lib.exp(2 * log_scale) * lib.exp(-(d * d) / (2 * lib.exp(2 * log_len)))


def nll(lib, params, x, y):
    """Negative log marginal likelihood; ``params = (log ℓ, log s, log σ)`` as a (3,) tensor."""
    log_len, log_scale, log_noise = params[0], params[1], params[2]
    n = x.shape[0]
    k = kernel(lib, x, x, log_len, log_scale) + lib.exp(2 * log_noise) * lib.eye(n, dtype=x.dtype)
    chol = lib.linalg.cholesky(k)
    alpha = lib.linalg.solve_triangular(chol, y[:, None], upper=False)
    half_logdet = lib.log(lib.diagonal(chol)).sum()
    return 0.5 * (alpha * alpha).sum() + half_logdet + 0.5 * n * math.log(2 * math.pi)


def posterior_mean(params, x, y, x_new):
    log_len, log_scale, log_noise = params[0], params[1], params[2]
    k = kernel(td, x, x, log_len, log_scale) + td.exp(2 * log_noise) * td.eye(len(x), dtype=x.dtype)
    return kernel(td, x_new, x, log_len, log_scale) @ td.linalg.solve(k, y)


def check_gradient(params0: np.ndarray, x: np.ndarray, y: np.ndarray) -> bool:
    p = td.tensor(params0, requires_grad=True)
    nll(td, p, td.tensor(x), td.tensor(y)).backward()
    ours = p.grad.data
    ok = True
    try:
        import torch

        tp = torch.tensor(params0, requires_grad=True)
        nll(torch, tp, torch.tensor(x), torch.tensor(y)).backward()
        err = float(np.abs(ours - tp.grad.numpy()).max())
        print(f"gradient at the start vs PyTorch:             max |difference| {err:.2e}")
        ok &= err < 1e-8
    except ImportError:
        print("gradient vs PyTorch: skipped (torch not installed)")
    eps, numeric = 1e-6, np.zeros(3)
    for i in range(3):
        step = np.eye(3)[i] * eps
        hi = nll(td, td.tensor(params0 + step), td.tensor(x), td.tensor(y)).item()
        lo = nll(td, td.tensor(params0 - step), td.tensor(x), td.tensor(y)).item()
        numeric[i] = (hi - lo) / (2 * eps)
    err = float(np.abs(ours - numeric).max())
    print(f"gradient at the start vs central differences: max |difference| {err:.2e}")
    return ok and err < 1e-5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="show no progress while training")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    x, y = make_data(80, rng)
    x_test = np.linspace(-1.9, 1.9, 200)
    y_test = np.sin(3 * x_test) + 0.3 * x_test
    start = np.log([1.0, 1.0, 0.5])  # lengthscale 1, signal 1, noise 0.5
    ok = check_gradient(start, x, y)

    params = td.tensor(start, requires_grad=True)
    opt = optim.Adam([params], lr=0.05)
    xt, yt = td.tensor(x), td.tensor(y)
    first = None
    for step in progress(range(args.steps), desc="Adam steps", quiet=args.quiet):
        opt.zero_grad()
        loss = nll(td, params, xt, yt)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
        if step % 30 == 0 or step == args.steps - 1:
            ell, s, noise = np.exp(params.data)
            print(f"step {step:3d}  NLL {loss.item():9.3f}  ℓ {ell:.3f}  s {s:.3f}  σ {noise:.3f}")
    noise = float(np.exp(params.data[2]))
    with td.no_grad():
        mean = posterior_mean(params, xt, yt, td.tensor(x_test)).data
    rmse = float(np.sqrt(np.mean((mean - y_test) ** 2)))
    print(f"learned noise σ = {noise:.3f} (true {TRUE_NOISE}); test RMSE of the mean {rmse:.3f}")
    ok &= TRUE_NOISE / 1.5 <= noise <= TRUE_NOISE * 1.5 and rmse <= 0.15
    print("all checks passed" if ok else "CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
