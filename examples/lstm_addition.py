"""Train an LSTM to add two 5-digit numbers, digit by digit, with tadiff.

The data are generated here: each example is a pair of random numbers below 10^5, written as
digits least significant first. At step t the LSTM reads the two digits ``a_t`` and ``b_t``
(one-hot, 20 features) and predicts digit t of the sum (10 classes; a sixth step with zero
digits emits the final carry). Getting a digit right needs the carry, so the network has to
remember one bit across steps. A test example counts as correct only if all 6 digits of the
sum are right.

Model: ``LSTM(20, 32)`` then ``Linear(32, 10)``; Adam (lr 0.02), batches of 64, cross-entropy
on every digit. With the default 400 steps it reaches at least 99% exact-sum accuracy on 1000
fresh test pairs (100% with each of seeds 0-5 here, in under 1 s of training on one core);
the script exits with status 1 below 99%.

Usage: ``python examples/lstm_addition.py [--steps 400] [--seed 0]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tadiff as td
import tadiff.nn as nn
import tadiff.optim as optim
from tadiff.utils.progress import progress

DIGITS = 5
TARGET_ACCURACY = 0.99


def make_sums(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random additions as LSTM inputs and per-digit targets.

    Returns:
        inputs ``(DIGITS + 1, n, 20)`` float32 (one-hot digit of a, then of b, per step) and
        targets ``(DIGITS + 1, n)`` int64 (the digits of ``a + b``, least significant first).
    """
    a, b = rng.integers(0, 10**DIGITS, n), rng.integers(0, 10**DIGITS, n)
    powers = 10 ** np.arange(DIGITS + 1)[:, None]
    digits_a, digits_b = (a // powers) % 10, (b // powers) % 10  # the extra step reads zeros
    eye = np.eye(10, dtype=np.float32)
    inputs = np.concatenate([eye[digits_a], eye[digits_b]], axis=-1)
    return inputs, ((a + b) // powers) % 10


class Adder(nn.Module):
    """An LSTM over the digit pairs and a linear read-out of each step's digit."""

    def __init__(self, hidden: int = 32):
        super().__init__()
        self.lstm = nn.LSTM(20, hidden)
        self.readout = nn.Linear(hidden, 10)

    def forward(self, inputs: td.Tensor) -> td.Tensor:
        """``(steps, batch, 20)`` -> logits ``(steps, batch, 10)``."""
        output, _ = self.lstm(inputs)
        return self.readout(output)


def exact_accuracy(model: Adder, inputs: np.ndarray, targets: np.ndarray) -> float:
    """Fraction of additions whose every digit is predicted right."""
    with td.no_grad():
        predicted = model(td.tensor(inputs)).numpy().argmax(-1)
    return float((predicted == targets).all(axis=0).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="show no progress while training")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    td.manual_seed(args.seed)
    test_inputs, test_targets = make_sums(1000, rng)
    model = Adder()
    optimizer = optim.Adam(model.parameters(), lr=0.02)
    start = time.perf_counter()
    for step in progress(range(1, args.steps + 1), desc="steps", quiet=args.quiet):
        inputs, targets = make_sums(args.batch_size, rng)
        logits = model(td.tensor(inputs))
        loss = nn.functional.cross_entropy(logits.reshape(-1, 10), td.tensor(targets.ravel()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == args.steps:
            accuracy = exact_accuracy(model, test_inputs, test_targets)
            print(f"step {step:4d}  loss {loss.item():.4f}  test exact-sum accuracy "
                  f"{100 * accuracy:.1f}%")  # fmt: skip
    elapsed = time.perf_counter() - start
    accuracy = exact_accuracy(model, test_inputs, test_targets)
    print(f"final test accuracy {100 * accuracy:.1f}% after {args.steps} steps ({elapsed:.1f} s)")
    return 0 if accuracy >= TARGET_ACCURACY else 1


if __name__ == "__main__":
    raise SystemExit(main())
