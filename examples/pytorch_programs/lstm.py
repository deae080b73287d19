"""A character-level LSTM's loss over a sequence, written the way ADBench's LSTM problem is.

Each layer is a diagonal LSTM cell (every gate multiplies its inputs element-wise); the state is
one matrix whose rows alternate hidden and memory rows of each layer. The program iterates over
the time steps and layers in Python, assigns rows of the new state (``state[i] = ...``), and
normalizes the prediction with Python's ``sum`` over the tensor's elements.

Shapes: ``weights, biases (layers, 4 b)``, ``extra (3, b)`` (input scale, output scale and
bias), ``state (2 layers, b)``, ``sequence (steps, b)`` with one-hot rows.
"""

import numpy as np
import torch

SIZES = {"test": (2, 6, 8), "bench": (2, 14, 12)}  # (layers, b, steps)


def make_inputs(size="test", dtype="float64", seed=0):
    layers, b, steps = SIZES[size]
    rng = np.random.default_rng(seed)
    dtype = getattr(torch, dtype)
    characters = rng.integers(0, b, steps)
    return {
        "weights": torch.tensor(rng.standard_normal((layers, 4 * b)) * 0.5, dtype=dtype),
        "biases": torch.tensor(rng.standard_normal((layers, 4 * b)) * 0.1, dtype=dtype),
        "extra": torch.tensor(rng.standard_normal((3, b)) * 0.5, dtype=dtype),
        "state": torch.tensor(rng.standard_normal((2 * layers, b)) * 0.1, dtype=dtype),
        "sequence": torch.nn.functional.one_hot(torch.from_numpy(characters), b).to(dtype),
    }


def cell(weight, bias, hidden, memory, x):
    gates = torch.cat((x, hidden, x, hidden)) * weight + bias
    size = hidden.shape[0]
    forget = torch.sigmoid(gates[:size])
    ingate = torch.sigmoid(gates[size : 2 * size])
    outgate = torch.sigmoid(gates[2 * size : 3 * size])
    change = torch.tanh(gates[3 * size :])
    memory = memory * forget + ingate * change
    hidden = outgate * torch.tanh(memory)
    return hidden, memory


def predict(weights, biases, extra, state, x):
    new_state = state.clone()
    x = x * extra[0]
    for layer in range(len(weights)):
        h, m = 2 * layer, 2 * layer + 1
        new_state[h], new_state[m] = cell(weights[layer], biases[layer], state[h], state[m], x)
        x = new_state[h]
    return x * extra[1] + extra[2], new_state


def objective(weights, biases, extra, state, sequence):
    total = 0.0
    x = sequence[0]
    for target in sequence[1:]:
        prediction, state = predict(weights, biases, extra, state, x)
        normalized = prediction - torch.log(sum(torch.exp(prediction), 2))
        total += sum(target * normalized)
        x = target
    return -total / (len(sequence) - 1)


def forward(inputs):
    return objective(**inputs)


def gradient(inputs):
    params = [inputs[k].detach().clone().requires_grad_() for k in ("weights", "biases", "extra")]
    loss = objective(*params, inputs["state"], inputs["sequence"])
    loss.backward()
    return {"value": loss.detach(), "weights": params[0].grad, "biases": params[1].grad,
            "extra": params[2].grad}  # fmt: skip
