"""A small normalizing flow built from FastH orthogonal layers, trained by maximum likelihood.

Data: 8-dimensional, non-Gaussian (four bimodal and four heavy-tailed coordinates, mixed by a
random rotation and stretch). Model: three blocks of

    Orthogonal    h ↦ U h,  U = H_1 ⋯ H_8 by FastH         log|det| = 0
    element-wise  h ↦ e^σ ⊙ (h + a ⊙ tanh(h − c)), a > −1  log|det| = Σ σ + log(1 + a(1 − tanh²))

mapping data to a standard normal latent. The negative log-likelihood on held-out data is compared
with the best Gaussian (full covariance): the flow must beat it. Runs in a few seconds on a CPU.

Usage: ``python examples/orthogonal_flow.py [--steps 400]``
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import tadiff as td
from tadiff.nn.module import Module, Parameter
from tadiff.nn.orthogonal import Orthogonal
from tadiff.optim import Adam
from tadiff.utils.progress import progress

D = 8


def make_data(n: int, rng: np.random.Generator) -> np.ndarray:
    bimodal = rng.choice([-1.5, 1.5], size=(n, 4)) + 0.35 * rng.standard_normal((n, 4))
    heavy = rng.laplace(size=(n, 4))
    u = np.concatenate([bimodal, heavy], axis=1)
    mix = np.linalg.qr(np.random.default_rng(123).standard_normal((D, D)))[0]
    return (u * np.linspace(0.5, 2.0, D)) @ mix.T


class ScaledBump(Module):
    """Invertible element-wise map ``e^σ (h + a tanh(h − c))`` with ``a = exp(p) − 1 > −1``."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.log_scale = Parameter(np.zeros(d))
        self.p = Parameter(np.zeros(d))
        self.c = Parameter(np.zeros(d))

    def forward(self, h):
        a = td.exp(self.p) - 1.0
        t = td.tanh(h - self.c)
        y = td.exp(self.log_scale) * (h + a * t)
        logdet = (self.log_scale + td.log(1.0 + a * (1.0 - t * t))).sum(dim=-1)
        return y, logdet


class Flow(Module):
    def __init__(self, depth: int = 3) -> None:
        super().__init__()
        self.rotations = [Orthogonal(D, dtype=td.float64) for _ in range(depth)]
        self.bumps = [ScaledBump(D) for _ in range(depth)]
        for i, (rot, bump) in enumerate(zip(self.rotations, self.bumps, strict=True)):
            self.add_module(f"rotation{i}", rot)
            self.add_module(f"bump{i}", bump)

    def forward(self, x):
        """Data (N, D) -> latent (N, D) and log|det ∂z/∂x| (N,)."""
        logdet = 0.0
        for rot, bump in zip(self.rotations, self.bumps, strict=True):
            logdet = logdet + rot.log_abs_det(x)  # zero: kept to show the flow interface
            x = rot(x)
            x, ld = bump(x)
            logdet = logdet + ld
        return x, logdet

    def nll(self, x):
        """Mean negative log-likelihood per sample, in nats."""
        z, logdet = self(x)
        log_base = -0.5 * (z * z).sum(dim=-1) - 0.5 * D * math.log(2 * math.pi)
        return -(log_base + logdet).mean()


def gaussian_nll(train: np.ndarray, test: np.ndarray) -> float:
    mu, cov = train.mean(0), np.cov(train.T, bias=True)
    diff = test - mu
    maha = np.einsum("ni,ij,nj->n", diff, np.linalg.inv(cov), diff)
    return float(0.5 * (maha.mean() + np.linalg.slogdet(cov)[1] + D * math.log(2 * math.pi)))


def main() -> None:
    parser = argparse.ArgumentParser(description="normalizing flow with FastH orthogonal layers")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--quiet", action="store_true", help="show no progress while training")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    td.manual_seed(0)
    train, test = make_data(4096, rng), make_data(4096, rng)
    x_train, x_test = td.tensor(train), td.tensor(test)

    flow = Flow()
    opt = Adam(flow.parameters(), lr=0.02)
    t0 = time.perf_counter()
    for step in progress(range(args.steps + 1), desc="steps", quiet=args.quiet):
        idx = rng.integers(0, len(train), 512)
        loss = flow.nll(td.tensor(train[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            with td.no_grad():
                print(
                    f"step {step:4d}  train NLL {float(loss.data):.3f}  "
                    f"test NLL {float(flow.nll(x_test).data):.3f}"
                )
    with td.no_grad():
        flow_nll = float(flow.nll(x_test).data)
        train_nll = float(flow.nll(x_train).data)
    base = gaussian_nll(train, test)
    print(f"trained in {time.perf_counter() - t0:.1f} s")
    print(
        f"held-out NLL: flow {flow_nll:.3f} nats, best Gaussian {base:.3f} nats "
        f"(flow better by {base - flow_nll:.3f}); flow train NLL {train_nll:.3f}"
    )

    # The orthogonal layers stayed exactly orthogonal through training, and they invert.
    rot = flow.rotations[0]
    U = rot.matrix().data
    x = x_test[:5]
    err_inv = float(np.abs(rot.inverse(rot(x)).data - x.data).max())
    print(
        f"max |UᵀU − I| = {np.abs(U.T @ U - np.eye(D)).max():.1e}, "
        f"max |U⁻¹(U x) − x| = {err_inv:.1e}"
    )
    assert flow_nll < base, "the flow should beat the Gaussian baseline"


if __name__ == "__main__":
    main()
