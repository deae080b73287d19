"""Tensor algebra in index notation with symbolic element-wise derivatives.

    >>> import numpy as np
    >>> f = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    >>> print(f.grad("w"))
    dw[o, c, k:w.shape[2]] = sum[b=0:x.shape[0], t=0:dy.shape[2]](dy[b, o, t] * x[b, c, k + 2*t])

- :func:`define` parses a definition into a :class:`TensorFunction` (call it on NumPy arrays,
  ``.grad(name)``, ``.jacobian(name)``, ``.vjp(g, **args)``, ``str``/``.latex()``).
- :func:`parse` gives the raw IR (:mod:`tadiff.index.expr`); :mod:`~tadiff.index.interpret`
  is the reference interpreter. See docs/index-notation.md.
- Called on tadiff Tensors a definition is an engine op with compiled forward and backward
  kernels (:mod:`tadiff.index.compile`: einsum, vectorized NumPy, Numba; ``stats()``).
"""

from tadiff.index.function import TensorFunction, define
from tadiff.index.parse import parse

__all__ = ["TensorFunction", "define", "parse"]
