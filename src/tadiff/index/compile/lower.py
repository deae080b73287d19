"""From a program to a kernel: each stage lowered by one backend, run in order.

:func:`lower_program` plans the definition (:func:`~tadiff.index.compile.schedule.plan_program`)
and lowers each stage:

* ``einsum`` — a stage that is a pure contraction (one ``np.einsum``, BLAS);
* ``numpy`` — the vectorized NumPy evaluation of the stage's definition (a convolution-like
  sum whose output side is narrow contracts first and adds shifted views of the product, see
  :mod:`~tadiff.index.compile._shifted_sum`). Where it would
  materialize more than the memory budget (every index of a sum nest as an array axis), the
  stage runs in chunks of its first output index, each chunk planned as a definition of its
  own, so temporaries stay under :func:`~tadiff.index.compile.schedule.memory_budget`;
* ``numba`` — the stage's planned loop nest, printed as a parallel Numba function;
* ``triton`` — the stage's definition as a Triton program (CUDA, or CPU under
  ``TRITON_INTERPRET=1``).

``auto`` takes, per stage: einsum for a contraction; the NumPy evaluation where it makes
window-unrolled BLAS products (convolutions); Numba's loops when numba is installed and the
stage is large enough that compiling pays off (:data:`AUTO_NUMBA_MIN_WORK`); else NumPy.

Example:
    >>> import numpy as np
    >>> from tadiff.index import define
    >>> f = define("y[i] = sum[k](x[i+k] * w[k])")
    >>> k = lower_program(f, {"x": (6,), "w": (3,)}, np.float64, "numpy")
    >>> k({"x": np.arange(6.0), "w": np.ones(3)}).tolist()
    [3.0, 6.0, 9.0, 12.0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from tadiff._optional import installed, usable
from tadiff.errors import InputError, MissingDependencyError
from tadiff.index.compile._shifted_sum import plan_shifted_sum
from tadiff.index.compile.loops import root_addend
from tadiff.index.compile.rewrite import product_factors
from tadiff.index.compile.schedule import (
    Program,
    Stage,
    definition,
    memory_budget,
    plan_program,
)
from tadiff.index.compile.vectorized import Kernel, lower_einsum, lower_numpy, with_addend
from tadiff.index.expr import (
    Access,
    Affine,
    Const,
    Index,
    Sum,
    Where,
    free_indices,
    substitute,
    walk,
)

__all__ = ["AUTO_NUMBA_MIN_WORK", "lower_gradients", "lower_program", "stage_backends"]

AUTO_NUMBA_MIN_WORK = 1e6
"""Estimated operations (plus loads and stores) of a stage from which ``auto`` compiles it with
Numba. Below, the vectorized NumPy evaluation takes about a millisecond; compiling a kernel
takes one to a few seconds, once per machine (numba's disk cache keeps it for later
processes)."""


def _split_addend(body):
    """``(addend, term)`` for a body that adds terms without sums to a sum nest (a bias added
    to a convolution, see :func:`~tadiff.index.compile.loops.root_addend`), else None."""
    split = root_addend(body)
    if split is None or any(isinstance(n, Sum) for n in walk(split[0])):
        return None
    return split


def _contraction_factors(body) -> list | None:
    """The factors under a sum nest of a product of accesses — the nest possibly scaled, added
    to terms without sums (:func:`_split_addend`), or under a ``where`` whose other branch is
    zero (a strided convolution's input gradient, masked by residue) — else None."""
    if isinstance(body, Where) and isinstance(body.other, Const) and body.other.value == 0:
        body = body.then
    split = _split_addend(body)
    if split is not None:
        body = split[1]
    if not isinstance(body, Sum):
        _, factors = product_factors(body)
        sums = [f for f in factors if isinstance(f, Sum)]
        if len(sums) != 1 or len(factors) != 1:
            return None
        body = sums[0]
    while isinstance(body, Sum):
        body = body.body
    _, factors = product_factors(body)
    if factors and all(isinstance(f, Access | Index) for f in factors):
        return factors
    return None


def _is_contraction_like(stage: Stage) -> bool:
    """A sum nest of a product of accesses: the NumPy path makes BLAS products of it (window
    unrolled or im2col) instead of an array of the whole iteration space."""
    return _contraction_factors(stage.fn.body) is not None


BLAS_MIN_WIDTH = 16
"""The narrowest matrix side (rows, columns, contracted length) for which a contraction-like
stage runs as NumPy's im2col product rather than as loops. Measured on float32 convolutions,
one thread: an 8->16 channel 3x3 convolution (sides 4096, 16 and 72) is 5x faster as a BLAS
product, a depthwise one (a side of 1) 3-6x faster as loops. Window-unrolled and
product-first plans say themselves whether their products are too narrow
(``WINDOW_MIN_SIDE``, ``PRODUCT_MIN_SIDE``)."""


def _blas_shaped(stage: Stage) -> bool:
    """Whether a contraction-like stage of two accesses is a matrix product with every side at
    least :data:`BLAS_MIN_WIDTH` wide: rows are the output indices only the first access reads,
    columns those only the second reads, the contracted length is the terms per output element."""
    factors = _contraction_factors(stage.fn.body)
    if factors is None:
        return False
    accesses = [f for f in factors if isinstance(f, Access)]
    if len(accesses) != 2 or not stage.out_shape:
        return False
    first, second = (free_indices(a) for a in accesses)
    sizes = dict(zip(stage.fn.out_vars, stage.out_shape, strict=True))
    rows = math.prod(n for v, n in sizes.items() if v in first and v not in second)
    cols = math.prod(n for v, n in sizes.items() if v in second and v not in first)
    terms = stage.nest.ops / 2 / math.prod(stage.out_shape)  # a multiply and an add per term
    return min(rows, cols, terms) >= BLAS_MIN_WIDTH


def stage_backends(program: Program, backend: str) -> list[str]:
    """The backend each stage of ``program`` runs on when ``backend`` is asked for."""
    return [name for name, _ in _choices(program, backend)]


def _choices(program: Program, backend: str) -> list[tuple[str, Kernel | None]]:
    """Per stage, the backend and, where choosing it needed one, its kernel already built."""
    out: list[tuple[str, Kernel | None]] = []
    for stage in program.stages:
        if backend != "auto":
            out.append((backend, None))
            continue
        k = _einsum_kernel(stage, program, stage.fn.args)
        if k is not None:
            out.append(("einsum", k))
            continue
        # Numba is asked for (and imported) only where a stage would run on it
        big = stage.nest.cost >= AUTO_NUMBA_MIN_WORK
        if _is_contraction_like(stage):
            # a contraction whose matrices are wide enough runs as BLAS products (of windows, of
            # an im2col copy, or contracted first); one with a narrow side (a depthwise
            # convolution's, a layer of one channel) runs faster as loops
            k = _numpy_kernel(stage, {a: program.shapes[a] for a in stage.fn.args}, program.dtype)
            wide = _blas_shaped(stage) if k.narrow is None else not k.narrow
            if not big or wide or not usable("numba"):
                out.append(("numpy", k))
                continue
        out.append(("numba", None) if big and usable("numba") else ("numpy", None))
    return out


def _loop_plan(program: Program, choices: list) -> tuple[list[Stage], list]:
    """The stages to run and their backends: where every stage runs on Numba and the program
    has a scatter or a windowed form (cheaper for loops), that one stage instead."""
    if program.alternative is not None and all(b == "numba" for b, _ in choices):
        return [program.alternative], [("numba", None)]
    return program.stages, choices


def _einsum_kernel(stage: Stage, program: Program, args) -> Kernel | None:
    shapes = {a: program.shapes[a] for a in args}
    params = stage.fn._params(shapes)
    return lower_einsum(stage.fn, params, shapes, stage.out_shape, program.dtype)


def _numpy_kernel(stage: Stage, shapes: Mapping, dtype: np.dtype) -> Kernel:
    fn, out_shape = stage.fn, stage.out_shape
    peak = stage.nest.peak * dtype.itemsize * 3  # a value and two operands alive at once
    budget = memory_budget()
    if _is_contraction_like(stage):
        return _contraction_kernel(fn, shapes, dtype, out_shape)
    if peak <= budget:
        return lower_numpy(fn, shapes, dtype, None, out_shape)
    if out_shape and out_shape[0] > 1 and peak / out_shape[0] <= budget:
        return _chunked(fn, shapes, dtype, out_shape, int(budget // (peak / out_shape[0])))
    found = _outer_sum(fn.body)
    if found is not None:  # a row is too large alone: divide the outermost sum's range
        return _chunked_sum(fn, found, shapes, dtype, out_shape, peak / budget)
    return lower_numpy(fn, shapes, dtype, None, out_shape)


def _contraction_kernel(fn, shapes: Mapping, dtype: np.dtype, out_shape) -> Kernel:
    """The NumPy kernel of a contraction-like definition: window-unrolled BLAS products, else
    the product-first plan where it copies less than im2col's, else im2col; an addend (a bias)
    is added to the contraction's result as it is laid out (:func:`with_addend`)."""
    split = _split_addend(fn.body)
    if split is not None:
        addend, term = split
        inner_fn = definition(fn.out_name, fn.out_vars, out_shape, term, shapes, fn.args)
        inner_shapes = {a: shapes[a] for a in inner_fn.args}
        inner = _contraction_kernel(inner_fn, inner_shapes, dtype, out_shape)
        return with_addend(inner, fn, addend, shapes, dtype, out_shape)
    k = lower_numpy(fn, shapes, dtype, None, out_shape)
    if "window-unrolled" not in k.source:  # im2col: contracting first may copy less
        return plan_shifted_sum(fn, shapes, dtype, out_shape) or k
    return k


def _outer_sum(body) -> Sum | None:
    """The sum a body is (up to factors outside it), whose range can be split."""
    _, factors = product_factors(body)
    sums = [f for f in factors if isinstance(f, Sum)]
    return sums[0] if len(sums) == 1 else None


def _chunked_sum(fn, outer: Sum, shapes, dtype, out_shape, parts: float) -> Kernel:
    """The NumPy kernel of ``fn`` with its outermost sum's range cut into pieces whose
    evaluation fits the budget: the body is linear in that sum, so the pieces add up."""
    from tadiff.index.compile.rewrite import replace_node, sum_interval

    params = fn._params(shapes)
    box = {v: (0, n - 1) for v, n in zip(fn.out_vars, out_shape, strict=True)}
    lo, hi = sum_interval(outer.lower, outer.upper, box, params)
    step = max(1, int((hi - lo + 1) / max(parts, 1.0)))
    pieces = []
    for start in range(lo, hi + 1, step):
        piece = Sum(
            outer.var,
            (*outer.lower, Affine.constant(start)),
            (*outer.upper, Affine.constant(min(hi, start + step - 1))),
            outer.body,
        )
        sub = definition(
            fn.out_name,
            fn.out_vars,
            out_shape,
            replace_node(fn.body, outer, piece),
            shapes,
            fn.args,
        )
        pieces.append(lower_numpy(sub, {a: shapes[a] for a in sub.args}, dtype, None, out_shape))

    def run(arrays):
        total = pieces[0](arrays)
        for k in pieces[1:]:
            total += k(arrays)
        return total

    text = f"vectorized plan of {fn} in {len(pieces)} pieces of the range of {outer.var}"
    return Kernel("numpy", run, tuple(out_shape), dtype, text)


def _chunked(fn, shapes, dtype, out_shape, rows: int) -> Kernel:
    """The NumPy kernel of ``fn`` evaluated ``rows`` values of its first index at a time."""
    var, n0 = fn.out_vars[0], out_shape[0]
    starts = list(range(0, n0, rows))
    keep = len(starts) <= 16  # a few chunk kernels are kept; many are planned per call
    kernels: dict[int, Kernel] = {}

    def chunk(start: int) -> Kernel:
        k = kernels.get(start)
        if k is None:
            size = min(rows, n0 - start)
            body = substitute(fn.body, {var: Affine.variable(var) + start})
            sub = definition(
                fn.out_name, fn.out_vars, (size, *out_shape[1:]), body, shapes, fn.args
            )
            k = lower_numpy(
                sub,
                {a: shapes[a] for a in sub.args},
                dtype,
                None,
                sub.output_shape(**{a: shapes[a] for a in sub.args}),
            )
            if keep:
                kernels[start] = k
        return k

    def run(arrays):
        out = np.empty(out_shape, dtype=dtype)
        for start in starts:
            out[start : start + rows] = chunk(start)(arrays)
        return out

    text = f"vectorized plan of {fn} in chunks of {rows} along {var}"
    return Kernel("numpy", run, tuple(out_shape), dtype, text)


def _stage_kernel(stage: Stage, program: Program, backend: str) -> Kernel:
    shapes = {a: program.shapes[a] for a in stage.fn.args}
    dtype = program.dtype
    if backend == "einsum":
        k = _einsum_kernel(stage, program, stage.fn.args)
        if k is not None:
            return k
        backend = "numpy"
    if backend == "numba":
        from tadiff.index.compile.numba_backend import lower_numba

        return lower_numba(stage.fn, stage.nest, shapes, dtype, stage.out_shape)
    if backend == "triton":
        from tadiff.index.compile.triton_backend import lower_triton

        params = stage.fn._params(shapes)
        return lower_triton(stage.fn, shapes, dtype, params, stage.out_shape)
    return _numpy_kernel(stage, shapes, dtype)


def lower_program(
    fn,
    shapes: Mapping[str, tuple[int, ...]],
    dtype,
    backend: str = "auto",
    known: Mapping[str, tuple[object, tuple[int, ...]]] | None = None,
) -> Kernel:
    """The kernel of ``fn`` for these shapes: its program, each stage on a backend.

    Args:
        fn: a TensorFunction.
        shapes: argument name -> shape.
        dtype: float32 or float64.
        backend: ``"auto"``, ``"numpy"``, ``"numba"`` or ``"triton"`` (``"einsum"`` is handled
            by the caller).
        known: saved values the kernel may read, ``name -> (TensorFunction, shape)`` (see
            :func:`~tadiff.index.compile.schedule.plan_program`); the caller passes their
            arrays under those names.

    Returns:
        A :class:`~tadiff.index.compile.vectorized.Kernel`; its ``program`` attribute is the plan.
    """
    dtype = np.dtype(dtype)
    if backend == "numba" and not installed("numba"):
        raise MissingDependencyError("the numba backend", "numba", "numba")
    if backend == "triton":
        try:
            import torch  # noqa: F401
            import triton  # noqa: F401
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise MissingDependencyError("the triton backend", e.name or "triton", "triton") from e
    if backend not in ("auto", "numpy", "numba", "triton"):
        raise InputError(f"lower_program: unknown backend {backend!r}")
    program = plan_program(fn, shapes, dtype, known)
    stages, choices = _loop_plan(program, _choices(program, backend))
    kernels = [
        k if k is not None else _stage_kernel(s, program, b)
        for s, (b, k) in zip(stages, choices, strict=True)
    ]
    names = [s.fn.out_name for s in stages]
    out_shape = tuple(program.stages[-1].out_shape)

    if len(kernels) == 1:
        only = kernels[0]
        run = only._run
    else:

        def run(arrays):
            values = dict(arrays)
            for name, k in zip(names, kernels, strict=True):
                values[name] = k(values)
            return values[names[-1]]

    used = list(dict.fromkeys(k.backend for k in kernels))
    source = "\n\n".join(k.source for k in kernels)
    result = Kernel("+".join(used), run, out_shape, dtype, source)
    result.program = program
    result.stage_backends = [k.backend for k in kernels]
    return result


def lower_gradients(
    fn,
    wrts: tuple[str, ...],
    shapes: Mapping[str, tuple[int, ...]],
    dtype,
    backend: str = "auto",
    known: Mapping[str, tuple[object, tuple[int, ...]]] | None = None,
):
    """A callable ``arrays -> {argument: gradient}`` computing ``fn``'s derivatives with respect
    to ``wrts`` together (:func:`~tadiff.index.compile.schedule.plan_gradients`): stages that
    share their outer loops and run on Numba are one nest.

    Args:
        fn: the forward TensorFunction.
        wrts: the arguments to differentiate with respect to.
        shapes: the shapes of ``fn``'s arguments and of the incoming gradient.
        dtype, backend, known: as for :func:`lower_program`.
    """
    from tadiff.index.compile.schedule import plan_gradients

    dtype = np.dtype(dtype)
    einsums = {}
    for name in wrts:
        g = fn.grad(name)
        arg_shapes = {a: shapes[a] for a in g.args}
        if backend in ("auto", "einsum"):
            out_shape = g.output_shape(**arg_shapes)
            k = lower_einsum(g, g._params(arg_shapes), arg_shapes, out_shape, dtype)
            if k is not None:
                einsums[name] = k
    rest = tuple(n for n in wrts if n not in einsums)
    plan = plan_gradients(fn, rest, shapes, dtype, known) if rest else None
    runners = []  # (stage keys it computes, callable arrays -> {name: array})
    done: set[tuple[str, int]] = set()
    if plan is not None:
        choices = {w: _choices(p, backend) for w, p in plan.programs.items()}
        all_shapes = {k: v for p in plan.programs.values() for k, v in p.shapes.items()}
        for members, nest in plan.fused:
            if any(choices[w][k][0] != "numba" for w, k in members):
                continue
            from tadiff.index.compile.numba_backend import lower_numba_fused

            stages = [plan.programs[w].stages[k] for w, k in members]
            run = lower_numba_fused(
                [s.fn for s in stages], nest, all_shapes, dtype, [s.out_shape for s in stages]
            )
            runners.append(run)
            done.update(members)
        for w, program in plan.programs.items():
            stages, chosen = _loop_plan(program, choices[w])
            for k, (stage, (b, kern)) in enumerate(zip(stages, chosen, strict=True)):
                if (w, k) in done:
                    continue
                kern = kern if kern is not None else _stage_kernel(stage, program, b)
                runners.append(_named(stage.fn.out_name, kern))
    finals = {w: p.stages[-1].fn.out_name for w, p in (plan.programs.items() if plan else ())}

    # compiled loops need contiguous arrays: where two or more run, each array is made
    # contiguous once for all of them (the incoming gradient of a sum is a broadcast view, which
    # each kernel would copy again); NumPy kernels take strided views as they are
    loops = sum(getattr(r, "backend", "numba") == "numba" for r in runners)

    def run(arrays):
        if loops > 1:
            arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
        values = dict(arrays)
        out = {name: k({a: arrays[a] for a in k_args(name)}) for name, k in einsums.items()}
        for r in runners:
            values.update(r(values))
        out.update({w: values[name] for w, name in finals.items()})
        return out

    def k_args(name):
        return fn.grad(name).args

    run.plan = plan
    # one entry per kernel built (a fused nest counts once), for the cache's statistics
    run.backends = ["einsum"] * len(einsums) + [getattr(r, "backend", "numba") for r in runners]
    return run


def _named(name: str, kernel: Kernel):
    def run(values):
        return {name: kernel(values)}

    run.backend = kernel.backend
    return run
