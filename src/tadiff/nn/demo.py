"""Showcase for ``tadiff demo``: train a tiny classifier and draw the graph it backpropagates.

Self-checks: the loss falls; the gradient of the loss agrees with central differences (float64);
the picture (SVG when graphviz's ``dot`` is installed, DOT text otherwise) is written.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

import tadiff as td
from tadiff import viz
from tadiff.nn import functional as F
from tadiff.nn.activation import Tanh
from tadiff.nn.container import Sequential
from tadiff.nn.linear import Linear
from tadiff.optim import Adam


def _two_moons(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved half circles with a little noise; labels 0 and 1."""
    angle = rng.uniform(0.0, np.pi, n)
    label = rng.integers(0, 2, n)
    x = np.where(label == 0, np.cos(angle), 1.0 - np.cos(angle))
    y = np.where(label == 0, np.sin(angle), 0.5 - np.sin(angle))
    points = np.stack([x, y], axis=1) + rng.normal(0.0, 0.1, (n, 2))
    return points.astype(np.float32), label.astype(np.int64)


def _gradient_matches_differences(model: Sequential, x: np.ndarray, y: np.ndarray) -> float:
    """Largest |analytic - central difference| over a few weight entries, in float64."""
    model.double()
    inputs, labels = td.tensor(x.astype(np.float64)), td.tensor(y)
    weight = model[0].weight
    model.zero_grad()
    F.cross_entropy(model(inputs), labels).backward()
    analytic = weight.grad.data.copy()
    worst, eps = 0.0, 1e-6
    for index in [(0, 0), (3, 1), (7, 0)]:
        saved = weight.data[index]
        losses = []
        for shift in (eps, -eps):
            weight.data[index] = saved + shift
            with td.no_grad():
                losses.append(float(F.cross_entropy(model(inputs), labels)))
        weight.data[index] = saved
        numeric = (losses[0] - losses[1]) / (2 * eps)
        worst = max(worst, abs(numeric - analytic[index]))
    model.float()
    return worst


def run(out: Callable[[str], None], directory: str | Path | None = None) -> bool:
    """Train a 2-16-2 MLP on 128 moon points for 60 Adam steps, check, and draw its graph.

    Args:
        out: where to print.
        directory: where to write the picture (default: a new temporary folder).

    Returns:
        True when every self-check passed.
    """
    td.manual_seed(0)
    rng = np.random.default_rng(0)
    x, y = _two_moons(128, rng)
    model = Sequential(Linear(2, 16), Tanh(), Linear(16, 2))
    optimizer = Adam(model.parameters(), lr=0.05)
    inputs, labels = td.tensor(x), td.tensor(y)
    losses = []
    for step in range(60):
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
        if step % 10 == 0 or step == 59:
            out(f"  step {step:2d}  loss {losses[-1]:.4f}")
    with td.no_grad():
        accuracy = float((model(inputs).data.argmax(axis=1) == y).mean())
    fell = losses[-1] < 0.5 * losses[0]
    out(f"  loss {losses[0]:.4f} -> {losses[-1]:.4f}, training accuracy {accuracy:.1%}")
    out(f"  loss fell by more than half: {'ok' if fell else 'FAILED'}")

    gap = _gradient_matches_differences(model, x, y)
    grad_ok = gap < 1e-6
    out(
        f"  gradient vs central differences (float64): max gap {gap:.1e} "
        f"{'ok' if grad_ok else 'FAILED'}"
    )

    folder = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="tadiff-"))
    loss = F.cross_entropy(model(inputs[:4]), labels[:4])
    names = {f"model.{name}": p for name, p in model.named_parameters()}
    names["loss"] = loss
    path, note = viz.render_or_dot(loss, folder / "mlp_graph.svg", names=names)
    if note:
        out(f"  ({note})")
    drawn = path.exists() and path.stat().st_size > 0
    out(f"  backward graph of the loss: {path} {'ok' if drawn else 'FAILED'}")
    return fell and grad_ok and drawn
