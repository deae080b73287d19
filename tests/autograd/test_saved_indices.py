"""Index and mask tensors that indexing ops keep for the backward pass are copies: writing into
the caller's tensor between the forward and the backward pass leaves the gradient that of the
forward that was computed (torch raises its "modified by an inplace operation" error there;
tadiff's copy gives the right gradient instead). The oracle is the same program run with an
index that is never written. Values are small integers times exact weights: exact."""

import numpy as np
import pytest

import tadiff as td

WEIGHTS = np.array([1.0, 2.0, 3.0, 5.0, 7.0, 11.0, 13.0, 17.0])


def _rows(x, i):
    return x[i]


def _rows_and_column(x, i):
    return x[i, 0]  # the general indexing path (an array among other indices)


def _mask(x, m):
    return x[m]


def _gather(x, i):
    return td.gather(x, 0, i.reshape(-1, 1).expand(-1, 2))


def _index_add(x, i):
    return td.zeros(4, 2).index_add(0, i, x[:3])


def _index_add_inplace(x, i):
    return td.zeros(4, 2).index_add_(0, i, x[:3])


def _scatter_add(x, i):
    return td.zeros(4, 2).scatter_add(0, i.reshape(-1, 1).expand(-1, 2), x[:3])


def _row_write(x, i):
    out = td.zeros(4, 2)
    out[i] = x[:3]
    return out


def _where(x, m):
    return td.where(m.reshape(-1, 1), x, 0.0)


CASES = {
    "x[index]": (_rows, [0, 3, 0], [2, 2, 2]),
    "x[index, 0]": (_rows_and_column, [0, 3, 0], [2, 2, 2]),
    "x[mask]": (_mask, [True, False, True, False], [False, True, False, True]),
    "gather": (_gather, [0, 3, 0], [2, 2, 2]),
    "index_add": (_index_add, [0, 3, 1], [2, 2, 2]),
    "index_add_": (_index_add_inplace, [0, 3, 1], [2, 2, 2]),
    "scatter_add": (_scatter_add, [0, 3, 1], [2, 2, 2]),
    "x[index] = v": (_row_write, [0, 3, 1], [2, 2, 2]),
    "where": (_where, [True, False, True, False], [False, True, False, True]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_writing_into_an_index_after_the_forward_leaves_its_gradient(name):
    op, index, other = CASES[name]
    grads = []
    for write_after in (False, True):
        x = td.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
        i = td.tensor(index)
        out = op(x, i)
        if write_after:
            i[...] = td.tensor(other)  # the caller reuses its index tensor
        weights = td.tensor(WEIGHTS[: out.numel()].reshape(out.shape))
        (out * weights).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
