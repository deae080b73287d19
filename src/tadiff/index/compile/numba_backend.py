"""Numba kernels: each stage's planned loop nest, printed as a parallel Numba function.

The scheduler (:mod:`~tadiff.index.compile.schedule`) decides everything — loop order, the
level at which each subexpression is computed, accumulation into the output — and this module
only prints the nest (:mod:`~tadiff.index.compile.loops`): the outermost output loop is a
``numba.prange`` (threads split it), a sum is an accumulator and a loop with exact bounds
(``max(ceil(lower))`` to ``min(floor(upper))``, no mask, no atomics), a ``where`` is an
``if``. Values are computed in the kernel's dtype: float32 inputs stay float32 (constants are
typed, accumulators start at a typed zero) so LLVM can use float32 SIMD; small integer powers
are multiplications.

Sizes are read from a parameter vector at run time, so one source serves every shape with the
same schedule. The source is written to a file in the cache directory (``$TADIFF_CACHE_DIR``,
default ``~/.cache/tadiff/numba``) and compiled with ``cache=True``: a later process loads the
machine code from disk. The first call of a kernel in a process compiles it (or loads it); that
time is counted in :func:`~tadiff.index.compile.stats` (``jit_seconds``).

Example:
    >>> import numpy as np
    >>> from tadiff.index import define
    >>> src = numba_source(define("y[i] = sum[k](x[i,k])"), {"x": (4, 3)})
    >>> "numba.prange" in src
    True
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Mapping

import numpy as np

from tadiff.index.compile._codegen import SourceEmitter, nest
from tadiff.index.compile.cache import record_jit, source_dir
from tadiff.index.compile.loops import (
    AddTo,
    Assign,
    If,
    Init,
    Let,
    Loop,
    Nest,
    Store,
    defined_names,
)
from tadiff.index.compile.vectorized import Kernel
from tadiff.index.expr import size_param

__all__ = [
    "exp_loop",
    "fused_source",
    "lower_numba",
    "lower_numba_fused",
    "numba_source",
    "run_in_python",
    "stage_source",
]

# The exponential written out (Cody-Waite range reduction, then Cephes' polynomial for float32
# and the Taylor polynomial of degree 13 for float64, whose remainder on |r| <= ln(2)/2 is below
# 1e-17; 2**n built from its bits): unlike a call to the C library's exp it inlines, so a loop
# of exponentials vectorizes. Float32 within 1 ulp of the correctly rounded value, float64 within
# 1 ulp of the exact one (tests/index/test_schedule.py checks both on dense grids); inf, 0 and
# nan as exp.
_EXP = """
@_intrinsic
def _f32_from_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.FloatType())

    return _types.float32(_types.int32), codegen


@_intrinsic
def _f64_from_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.DoubleType())

    return _types.float64(_types.int64), codegen


@_intrinsic
def _bits_from_f64(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.IntType(64))

    return _types.int64(_types.float64), codegen


@numba.njit(inline="always", fastmath=_FAST)
def _exp32(x):
    F = np.float32
    c = min(max(x, F(-103.972)), F(88.7228))
    n = np.floor(c * F(1.44269504088896341) + F(0.5))
    r = c - n * F(0.693359375) + n * F(2.12194440e-4)
    p = F(1.9875691500e-4)
    p = p * r + F(1.3981999507e-3)
    p = p * r + F(8.3334519073e-3)
    p = p * r + F(4.1665795894e-2)
    p = p * r + F(1.6666665459e-1)
    p = p * r + F(5.0000001201e-1)
    y = p * r * r + r + F(1.0)
    k = np.int32(n)
    h = k >> np.int32(1)
    y = y * _f32_from_bits((h + np.int32(127)) << np.int32(23))
    y = y * _f32_from_bits((k - h + np.int32(127)) << np.int32(23))
    y = F(0.0) if x < F(-103.972) else y
    return F(np.inf) if x > F(88.7228) else y


@numba.njit(inline="always", fastmath=_FAST)
def _exp64(x):
    c = min(max(x, -745.2), 709.79)
    n = np.floor(c * 1.4426950408889634073599 + 0.5)
    r = c - n * 6.93147180369123816490e-1 - n * 1.90821492927058770002e-10
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    y = 1.0 + (r + r * r * p)
    # n as an int64 without a float -> int64 conversion, which AVX2 lacks (LLVM would make the
    # loop scalar there): n + 1.5 * 2**52 holds n in its low mantissa bits
    k = _bits_from_f64(n + 6755399441055744.0) - np.int64(0x4338000000000000)
    h = k >> np.int64(1)
    y = y * _f64_from_bits((h + np.int64(1023)) << np.int64(52))
    y = y * _f64_from_bits((k - h + np.int64(1023)) << np.int64(52))
    y = 0.0 if x < -745.2 else y
    return np.inf if x > 709.79 else y


_exp = _exp32 if DT is np.float32 else _exp64

"""

_HEADER = (
    '''"""Generated by tadiff.index.compile.numba_backend from:

{text}
"""
import numba
import numpy as np
from llvmlite import ir as _ir
from numba import types as _types
from numba.extending import intrinsic as _intrinsic

DT = np.{dtype}
_U = np.uint64  # in-bounds indices, printed unsigned (see the printer)
# reassociation lets LLVM vectorize the sum loops, contraction fuses multiply-adds; no flag that
# changes inf/nan semantics
_FAST = {{"reassoc", "contract"}}

'''
    + _EXP
)

_FUNCS = {
    "exp": "_exp",
    "log": "np.log",
    "sin": "np.sin",
    "cos": "np.cos",
    "tan": "np.tan",
    "tanh": "np.tanh",
    "sqrt": "np.sqrt",
    "abs": "abs",
    "sign": "np.sign",
    "maximum": "max",
    "minimum": "min",
}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}


def _literal(value: float) -> str:
    if math.isnan(value):
        return "np.nan"
    if math.isinf(value):
        return "np.inf" if value > 0 else "-np.inf"
    return repr(float(value))


class _Printer(SourceEmitter):
    """Prints a loop nest; loop variables are already unique names of the nest."""

    def __init__(self, outputs: dict[str, str]):
        super().__init__()
        self.outputs = outputs  # array name -> its parameter in the kernel
        self.chunk: dict[str, str] = {}  # private array -> the variable of its thread's copy

    def param_ref(self, name: str) -> str:
        return f"prm[{self.param_slot(name)}]"

    def array(self, name: str) -> str:
        return self.outputs.get(name, f"a_{name}")

    def index(self, indices) -> str:
        # Every executed access is in bounds (the static bounds check proves it, and a load never
        # leaves its `where` branch), so indices are cast to unsigned: Numba then skips the test
        # for negative (wrap-around) indices on every load, which made short inner loops up to
        # 1.8x slower. Run as Python, a negative index would raise at the cast.
        if not indices:
            return "0"
        parts = []
        for e in indices:
            num, den = self.affine(e, _LOOP_NAMES)
            parts.append(f"_U({num})" if den == 1 else f"_U({num} // {den})")
        return ", ".join(parts)

    def let(self, s: Let) -> str:
        if s.kind == "const":
            return f"DT({_literal(s.payload)})"
        if s.kind == "index":
            num, den = self.affine(s.payload, _LOOP_NAMES)
            return f"DT({num})" if den == 1 else f"DT({num}) / DT({den})"
        if s.kind == "load":
            name, indices = s.payload
            return f"{self.array(name)}[{self.index(indices)}]"
        a = s.args
        if s.kind == "neg":
            return f"-{a[0]}"
        if s.kind in _INFIX:
            return f"{a[0]} {_INFIX[s.kind]} {a[1]}"
        if s.kind == "powi":
            n = int(s.payload)
            if n == 0:
                return "DT(1.0)"
            product = " * ".join([a[0]] * abs(n))
            return product if n > 0 else f"DT(1.0) / ({product})"
        if s.kind == "sigmoid":
            # exp(-|x|) never overflows; the two branches are 1/(1+e) and e/(1+e)
            e = f"_exp(-abs({a[0]}))"
            return f"(DT(1.0) / (DT(1.0) + {e}) if {a[0]} >= DT(0.0) else {e} / (DT(1.0) + {e}))"
        return f"{_FUNCS[s.kind]}({', '.join(a)})"

    def bound(self, bounds, lower: bool) -> str:
        parts = []
        for b in bounds:
            num, den = self.affine(b, _LOOP_NAMES)
            if den == 1:
                parts.append(num)
            else:
                parts.append(f"(-(-{num} // {den}))" if lower else f"({num} // {den})")
        return nest("max" if lower else "min", parts)

    def block(self, block: list, indent: str, lines: list[str]) -> None:
        if not block:
            lines.append(f"{indent}pass")
        for s in block:
            if isinstance(s, Let):
                lines.append(f"{indent}{s.name} = {self.let(s)}")
            elif isinstance(s, Init):
                lines.append(f"{indent}{s.name} = DT(0.0)")
            elif isinstance(s, AddTo):
                lines.append(f"{indent}{s.name} += {s.value}")
            elif isinstance(s, Assign):
                lines.append(f"{indent}{s.name} = {s.value}")
            elif isinstance(s, Store):
                op = "+=" if s.accumulate else "="
                index = self.index(s.indices)
                if s.array in self.chunk:
                    index = f"{self.chunk[s.array]}, {index}"
                lines.append(f"{indent}{self.array(s.array)}[{index}] {op} {s.value}")
            elif isinstance(s, Loop) and s.private:
                self.chunked(s, indent, lines)
            elif isinstance(s, Loop) and s.phases is not None:
                self.phased(s, indent, lines)
            elif isinstance(s, Loop):
                lo, hi = self.bound(s.lower, True), self.bound(s.upper, False)
                rng = "numba.prange" if s.parallel else "range"
                lines.append(f"{indent}for {_LOOP_NAMES[s.var]} in {rng}({lo}, {hi} + 1):")
                self.block(s.body, indent + "    ", lines)
            elif isinstance(s, If):
                lines.append(
                    f"{indent}if {' and '.join(self.cond(c, _LOOP_NAMES) for c in s.conds)}:"
                )
                self.block(s.then, indent + "    ", lines)
                lines.append(f"{indent}else:")
                self.block(s.other, indent + "    ", lines)

    def chunked(self, s: Loop, indent: str, lines: list[str]) -> None:
        """A parallel loop that sums into private arrays: one contiguous chunk of its range per
        copy (the copies are the arrays' first axis, one per thread, added up by the caller)."""
        tag = var = _LOOP_NAMES[s.var]
        copies = f"{self.array(s.private[0])}.shape[0]"
        lines.append(f"{indent}lo_{tag} = {self.bound(s.lower, True)}")
        lines.append(f"{indent}n_{tag} = max({self.bound(s.upper, False)} + 1 - lo_{tag}, 0)")
        lines.append(f"{indent}for c_{tag} in numba.prange({copies}):")
        inner = indent + "    "
        first = f"lo_{tag} + c_{tag} * n_{tag} // {copies}"
        end = f"lo_{tag} + (c_{tag} + 1) * n_{tag} // {copies}"
        lines.append(f"{inner}for {var} in range({first}, {end}):")
        self.chunk.update({name: f"c_{tag}" for name in s.private})
        self.block(s.body, inner + "    ", lines)
        for name in s.private:
            del self.chunk[name]

    def phased(self, s: Loop, indent: str, lines: list[str]) -> None:
        """A loop in strips of ``s.width``: each phase loops over the strip, the values it
        passes on go through per-strip buffers (allocated here, so each thread has its own)."""
        tag = var = _LOOP_NAMES[s.var]
        for name in s.carried:
            lines.append(f"{indent}b_{name} = np.empty({s.width}, DT)")
        lines.append(f"{indent}lo_{tag} = {self.bound(s.lower, True)}")
        lines.append(f"{indent}hi_{tag} = {self.bound(s.upper, False)} + 1")
        lines.append(f"{indent}for s_{tag} in range(lo_{tag}, hi_{tag}, {s.width}):")
        inner = indent + "    "
        lines.append(f"{inner}e_{tag} = min(s_{tag} + {s.width}, hi_{tag})")
        defined: set[str] = set()
        for phase in s.phases:
            lines.append(f"{inner}for {var} in range(s_{tag}, e_{tag}):")
            body = inner + "    "
            slot = f"{var} - s_{tag}"
            for name in s.carried:
                if name in defined:
                    lines.append(f"{body}{name} = b_{name}[{slot}]")
            self.block(phase, body, lines)
            made = defined_names(phase)
            for name in s.carried:
                if name in made:
                    lines.append(f"{body}b_{name}[{slot}] = {name}")
            defined |= made


class _LoopNames(dict):
    """A loop variable of a nest is printed with the prefix ``i_``: no name the printer makes
    (``t1``, ``acc2``, ``lo_i_j``, ``prm``, ``out``, ``a_x``, ``DT``, ``numba``) starts with it,
    so an index the user calls ``acc1``, ``prm`` or ``np`` cannot shadow one of them."""

    def __missing__(self, key: str) -> str:
        return f"i_{key}"


_LOOP_NAMES = _LoopNames()


def _has_parallel(block: list) -> bool:
    return any(isinstance(s, Loop) and (s.parallel or _has_parallel(s.body)) for s in block)


def _compiles_parallel(nest: Nest) -> bool:
    """Whether the kernel of ``nest`` is compiled with Numba's ``parallel=True``: where it has a
    parallel loop, unless its estimated cost is below :data:`SERIAL_BUILD_BELOW`.

    Numba's parallel lowering takes 2-3x as long to compile (a small strided convolution's first
    call: 2.4 against 1.1 s), and every call enters the thread pool (11.7 against 10.2 µs per
    call of that kernel, on one thread). But its loops also run faster on one thread than a
    serial build's: a CNN's first convolution (64 images of 16 x 16, 8 channels) took 0.5 ms
    built parallel against 0.8-0.9 ms built serial. So only kernels of a few microseconds, where
    the compile time is all that counts (a test's, a first call's), are built serial. The source
    keeps ``numba.prange`` either way (a serial build reads it as ``range``)."""
    return _has_parallel(nest.body) and nest.cost >= SERIAL_BUILD_BELOW


def stage_source(fn, nest: Nest, dtype, python: bool = False) -> tuple[str, list[str]]:
    """The Numba source of one stage's nest and the size parameters it reads, in slot order.

    With ``python=True`` the same statements as a plain Python function (no numba needed): the
    schedule itself, run by the interpreter — what the tests check placements against.
    """
    printer = _Printer({fn.out_name: "out"})
    lines: list[str] = []
    printer.block(nest.body, "    ", lines)
    args = ", ".join(["out", "prm", *(f"a_{a}" for a in fn.args)])
    if python:
        return _python_source(args, lines, dtype), printer.params
    src = _HEADER.format(text=str(fn), dtype=np.dtype(dtype).name)
    src += f"@numba.njit(parallel={_compiles_parallel(nest)}, cache=True, error_model='numpy', "
    src += "fastmath=_FAST)\n"
    src += f"def kernel({args}):\n" + "\n".join(lines) + "\n"
    return src, printer.params


def _python_source(args: str, lines: list[str], dtype) -> str:
    """A kernel's statements as a plain Python function (what tests run the schedules as)."""
    dt = np.dtype(dtype).name
    src = f"import numpy as np\n\nDT = np.{dt}\n_U = np.uint64\n_exp = np.exp\n\n\n"
    body = "\n".join(lines).replace("numba.prange(", "range(")
    return src + f"def kernel({args}):\n{body}\n"


def run_in_python(program, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """Run every stage of ``program`` as plain Python loops (slow: small sizes only).

    This executes exactly the planned nests — order, placement, accumulation — without
    compiling them, so tests can check a schedule against the reference interpreter cheaply.
    """
    values = dict(arrays)
    dtype = program.dtype
    for stage in program.loops:
        fn = stage.fn
        src, names = stage_source(fn, stage.nest, dtype, python=True)
        scope: dict = {}
        exec(compile(src, f"<schedule of {fn.out_name}>", "exec"), scope)
        sizes = {size_param(a, d): n for a in fn.args for d, n in enumerate(program.shapes[a])}
        sizes.update({size_param(fn.out_name, d): n for d, n in enumerate(stage.out_shape)})
        prm = [sizes[n] for n in names]
        out = (np.zeros if stage.nest.zero_fill else np.empty)(stage.out_shape or (1,), dtype)
        args = [np.asarray(values[a], dtype).reshape(values[a].shape or (1,)) for a in fn.args]
        with np.errstate(all="ignore"):
            scope["kernel"](out, prm, *args)
        values[fn.out_name] = out.reshape(stage.out_shape)
    return values[program.loops[-1].fn.out_name]


def fused_source(fns, nest: Nest, dtype, python: bool = False) -> tuple[str, list[str], list[str]]:
    """The Numba source of a nest computing several stages' outputs (see
    :func:`~tadiff.index.compile.loops.build_fused_nest`), the size parameters it reads and the
    argument arrays it takes, in order (``python=True``: as plain Python, see
    :func:`stage_source`)."""
    outputs = {fn.out_name: f"o_{fn.out_name}" for fn in fns}
    printer = _Printer(outputs)
    lines: list[str] = []
    printer.block(nest.body, "    ", lines)
    inputs = sorted({a for fn in fns for a in fn.args} - set(outputs))
    args = ", ".join([*outputs.values(), "prm", *(f"a_{a}" for a in inputs)])
    if python:
        return _python_source(args, lines, dtype), printer.params, inputs
    text = "\n".join(str(fn) for fn in fns)
    src = _HEADER.format(text=text, dtype=np.dtype(dtype).name)
    src += f"@numba.njit(parallel={_compiles_parallel(nest)}, cache=True, error_model='numpy', "
    src += "fastmath=_FAST)\n"
    src += f"def kernel({args}):\n" + "\n".join(lines) + "\n"
    return src, printer.params, inputs


def lower_numba_fused(
    fns, nest: Nest, shapes: Mapping[str, tuple[int, ...]], dtype, out_shapes, python=False
):
    """A callable ``arrays -> {output name: array}`` running one fused nest with Numba
    (``python=True``: as plain Python loops, uncompiled — small sizes only, for tests)."""
    src, names, inputs = fused_source(fns, nest, dtype, python)
    if python:
        scope: dict = {}
        exec(compile(src, "<fused nest>", "exec"), scope)
        compiled = scope["kernel"]
    else:
        compiled = _load(src)
    values = {size_param(a, d): n for a in inputs for d, n in enumerate(shapes[a])}
    for fn, shape in zip(fns, out_shapes, strict=True):
        values.update({size_param(fn.out_name, d): n for d, n in enumerate(shape)})
    prm = np.array([values[n] for n in names] or [0], dtype=np.int64)
    dtype = np.dtype(dtype)
    fill = np.zeros if nest.zero_fill else np.empty
    cost = nest.cost

    private = [fn.out_name in nest.private for fn in fns]
    private_bytes = sum(
        math.prod(shape) * dtype.itemsize
        for shape, own in zip(out_shapes, private, strict=True)
        if own
    )

    def run(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if any(0 in shape for shape in out_shapes):
            return {fn.out_name: np.zeros(s, dtype) for fn, s in zip(fns, out_shapes, strict=True)}
        # as Python: two copies, so that tests run the chunks and the sum of the copies
        copies = 2 if python else private_copies(_threads(cost), private_bytes)
        outs = [
            np.zeros((copies, *(shape or (1,))), dtype) if own else fill(shape or (1,), dtype)
            for shape, own in zip(out_shapes, private, strict=True)
        ]
        args = [
            np.ascontiguousarray(arrays[a], dtype=dtype).reshape(arrays[a].shape or (1,))
            for a in inputs
        ]
        if python:
            with np.errstate(all="ignore"):
                compiled(*outs, prm, *args)
        elif compiled in _READY:
            compiled(*outs, prm, *args)
        else:
            start = time.perf_counter()
            compiled(*outs, prm, *args)
            record_jit(time.perf_counter() - start)
            _READY.add(compiled)
        outs = [o.sum(axis=0) if own else o for o, own in zip(outs, private, strict=True)]
        return {fn.out_name: _shaped(o, s) for fn, o, s in zip(fns, outs, out_shapes, strict=True)}

    run.source = src
    return run


def private_copies(threads: int, nbytes: int) -> int:
    """How many copies of a fused nest's private outputs (``nbytes`` together) to make: one per
    thread, as many as the temporaries budget holds beyond the first (the threads then split
    fewer, larger chunks).

    Example:
        >>> from tadiff.index.compile.schedule import memory_budget
        >>> private_copies(4, 1000), private_copies(4, memory_budget()), private_copies(4, 0)
        (4, 2, 4)
    """
    from tadiff.index.compile.schedule import memory_budget

    return max(1, min(threads, 1 + memory_budget() // max(nbytes, 1)))


def numba_source(fn, shapes: Mapping[str, tuple[int, ...]] | None = None, dtype=np.float64) -> str:
    """The generated Numba source of ``fn``'s program for argument ``shapes`` (every stage).

    Without shapes, every dimension is taken as 64 (the schedule can depend on the sizes).
    """
    from tadiff.index.compile.schedule import plan_program

    if shapes is None:
        shapes = {a: (64,) * fn.arg_ranks[a] for a in fn.args}
    program = plan_program(fn, shapes, dtype)
    return "\n\n".join(stage_source(s.fn, s.nest, dtype)[0] for s in program.loops)


_EXP_LOOP = """
@numba.njit(cache=True, error_model="numpy", fastmath=_FAST, nogil=True)
def kernel(x, out):
    for i in range(x.size):
        out[i] = _exp(x[i])
"""


@functools.cache
def exp_loop(dtype) -> Callable[[np.ndarray, np.ndarray], None]:
    """A compiled loop ``kernel(x, out)`` writing the inline exponential of the 1-d array ``x``
    into ``out`` (both of ``dtype``, ``out`` may be ``x``): vectorized, where NumPy's float64
    ``exp`` is a loop of scalar calls on CPUs without AVX-512. Its first call in a process
    compiles it, or loads it from Numba's disk cache."""
    text = "out[i] = exp(x[i]) for every i"
    return _load(_HEADER.format(text=text, dtype=np.dtype(dtype).name) + _EXP_LOOP)


_MODULES: dict[str, object] = {}

_READY: set = set()
"""Compiled kernels called before in this process (their machine code is loaded): a set lookup
per call, where asking a dispatcher for its ``signatures`` costs about 3 µs."""


def _load(src: str):
    digest = hashlib.sha256(src.encode()).hexdigest()[:20]
    module = _MODULES.get(digest)
    if module is not None:
        return module.kernel
    path = source_dir("numba") / f"tadiff_kernel_{digest}.py"
    if not path.exists() or path.read_text() != src:
        # write once: numba's disk cache is keyed by the file and its modification time
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(src)
        os.replace(tmp, path)
    name = f"_tadiff_numba_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _MODULES[digest] = module
    return module.kernel


def lower_numba(fn, nest: Nest, shapes: Mapping[str, tuple[int, ...]], dtype, out_shape) -> Kernel:
    """The Numba kernel of one stage ``fn`` with its planned ``nest``.

    Args:
        fn: the stage's TensorFunction.
        nest: its loop nest.
        shapes: argument name -> shape.
        dtype: float dtype of the arguments and result.
        out_shape: the output shape.

    Returns:
        A :class:`~tadiff.index.compile.vectorized.Kernel` (backend ``"numba"``); its first call
        compiles (or loads from disk) the machine code.
    """
    src, names = stage_source(fn, nest, dtype)
    compiled = _load(src)
    values = {size_param(a, d): n for a in fn.args for d, n in enumerate(shapes[a])}
    values.update({size_param(fn.out_name, d): n for d, n in enumerate(out_shape)})
    prm = np.array([values[n] for n in names] or [0], dtype=np.int64)
    dtype = np.dtype(dtype)
    out_shape = tuple(out_shape)
    args = fn.args
    empty = 0 in out_shape
    fill = np.zeros if nest.zero_fill else np.empty
    cost = nest.cost

    def run(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
        out = fill(out_shape or (1,), dtype=dtype)
        if empty:
            return out
        values = [
            np.ascontiguousarray(arrays[a], dtype=dtype).reshape(arrays[a].shape or (1,))
            for a in args
        ]
        _threads(cost)
        if compiled in _READY:
            compiled(out, prm, *values)
        else:  # this call compiles the machine code, or loads it from numba's disk cache
            start = time.perf_counter()
            compiled(out, prm, *values)
            record_jit(time.perf_counter() - start)
            _READY.add(compiled)
        return _shaped(out, out_shape)

    return Kernel("numba", run, out_shape, dtype, src)


def _shaped(out: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``out`` with ``shape``: itself where it has it already. A reshaped view would have a base,
    and the engine copies a gradient it does not own alone into ``.grad`` (a 64 MB copy for a
    convolution's input gradient)."""
    return out if out.shape == shape else out.reshape(shape)


def _threads(cost: float) -> int:
    """Set Numba's thread count for the calling thread to what a kernel of estimated ``cost``
    (:attr:`Nest.cost <tadiff.index.compile.loops.Nest.cost>`) runs on, and return it.

    A kernel below :data:`PARALLEL_FROM` runs on one thread; a larger one on
    :func:`tadiff.parallel.threads_in_use` (``td.set_num_threads``, less the cores other
    processes keep busy), at most the threads Numba started with.
    """
    import numba

    from tadiff.parallel import threads_in_use

    wanted = 1
    if cost >= PARALLEL_FROM:
        wanted = max(1, min(threads_in_use(), numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != wanted:
        numba.set_num_threads(wanted)
    return wanted


SERIAL_BUILD_BELOW = float(1 << 16)
"""The estimated cost (a few microseconds of work) below which a kernel is built without Numba's
``parallel=True`` (see :func:`_compiles_parallel`)."""

PARALLEL_FROM = float(1 << 24)
"""The estimated cost (about 0.5 ms of one core's work) from which a Numba kernel runs on more
than one thread. Below it a second thread gains at most a fraction of a millisecond, and both
thread pools in the process (Numba's and the BLAS library's) keep their threads spinning for a
while after each parallel call: on 2 cores the two pools then took each other's core, and a
small CNN's training took 60 ms per call on two threads with every kernel parallel, 35 ms with
this grain (``benchmarks/programs.py --programs cnn_train --threads 2``)."""
