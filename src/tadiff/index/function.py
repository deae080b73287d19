"""``TensorFunction``: an element-wise tensor definition you can call, print and differentiate.

Example:
    >>> import numpy as np
    >>> f = define("z[i,j] = sum[k](x[i,k] * w[k,j])")
    >>> x, w = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
    >>> f(x=x, w=w).tolist()
    [[3.0, 3.0], [12.0, 12.0]]
    >>> print(f.grad("x"))
    dx[i, k] = sum[j=0:w.shape[1]](dz[i, j] * w[k, j])
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, MissingDependencyError, ShapeError
from tadiff.index import expr as ir
from tadiff.index import interpret, printer, shapes
from tadiff.index.expr import (
    Access,
    Affine,
    Cond,
    Node,
    free_indices,
    fresh_name,
    index_exprs,
    is_param,
    size_param,
    walk,
)
from tadiff.index.limits import check_memory
from tadiff.index.parse import parse
from tadiff.index.simplify import simplify

__all__ = ["TensorFunction", "define"]


@dataclass(eq=False)
class TensorFunction:
    """``out_name[out_vars] = body``: a tensor defined element by element in index notation.

    Build one with :func:`define`; derivatives come from :meth:`grad`. Sizes are symbolic
    (``x.shape[1]``) until call time, so one definition and its derivatives serve every shape.

    Attributes:
        out_name: name of the defined tensor.
        out_vars: output index variables.
        out_ranges: per output index its symbolic inclusive range, or None when the size is
            inferred from the shapes at call time.
        args: argument names, in order (a derivative also lists arguments it only needs for
            their shapes).
        arg_ranks: argument name -> number of dimensions.
        body: the scalar expression.
        equal_sizes: ``(size, size, index)`` pairs that must agree (an index used plainly in
            two dimensions).
        parent: for a derivative, ``(function, wrt)`` it was derived from.
        jacobian_of: for a Jacobian, ``(function, wrt)``; its leading output sizes are that
            function's output shape.
        written: for a definition, its body as written (what ``str`` prints and what shapes
            are inferred and checked on); None for derived functions, whose body is both.
        written_sizes: the explicit output sizes of the text (None where inferred).
        sum_ranges: the inferred ranges of the sums ``written`` leaves open.
        shape_only: arguments used through their sizes only (``x.shape[0]``): any array
            with at least ``arg_ranks[name]`` dimensions.
    """

    out_name: str
    out_vars: tuple[str, ...]
    out_ranges: tuple[shapes.Range | None, ...]
    args: tuple[str, ...]
    arg_ranks: dict[str, int]
    body: Node
    equal_sizes: tuple[tuple[str, str, str], ...] = ()
    parent: tuple[TensorFunction, str] | None = None
    jacobian_of: tuple[TensorFunction, str] | None = None
    backend: str = "auto"
    written: Node | None = field(default=None, repr=False)
    written_sizes: tuple[Affine | None, ...] | None = field(default=None, repr=False)
    sum_ranges: dict = field(default_factory=dict, repr=False)
    shape_only: frozenset[str] = frozenset()
    _grads: dict[str, TensorFunction] = field(default_factory=dict, repr=False)
    _checked: dict = field(default_factory=dict, repr=False)
    _reads_output: dict = field(default_factory=dict, repr=False)
    _sites: list | None = field(default=None, repr=False)
    # argument layouts (shapes, dtypes) already checked and compiled for -> the kernel cache's key
    # (see tadiff.index.compile.engine_op): a repeated call skips both
    _layouts: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def sites(self) -> list[shapes.AccessSite]:
        """Every access as written, with its enclosing sums and conditions (what output sizes
        are inferred from and bounds are checked on)."""
        if self._sites is None:
            source = self.body if self.written is None else self.written
            self._sites = shapes.access_sites(source, self.sum_ranges)
        return self._sites

    # -- shapes ---------------------------------------------------------------------------------
    def _arrays(self, arrays: Mapping[str, object], convert: bool = True) -> dict[str, np.ndarray]:
        missing = [a for a in self.args if a not in arrays]
        extra = [a for a in arrays if a not in self.args]
        if missing or extra:
            raise InputError(
                f"{self.out_name} takes arguments {', '.join(self.args)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unexpected {', '.join(extra)}" if extra else "")
            )
        out = {}
        for name in self.args:
            if not isinstance(arrays[name], np.ndarray | np.generic | int | float | list | tuple):
                raise DTypeError(
                    f"argument {name} of {self.out_name}: the reference evaluation takes NumPy "
                    f"arrays (and compiled evaluation tadiff Tensors), got "
                    f"{type(arrays[name]).__name__} (convert with np.asarray; torch tensors go "
                    "through tadiff.torch)"
                )
            value = np.asarray(arrays[name])
            if value.dtype.kind not in "biuf":
                raise DTypeError(
                    f"argument {name} of {self.out_name} must be a real number array, "
                    f"got dtype {value.dtype}"
                )
            rank = self.arg_ranks[name]
            if name in self.shape_only:
                if value.ndim < rank:
                    raise ShapeError(
                        f"argument {name} of {self.out_name} needs at least {rank} "
                        f"dimensions (its sizes are used), but has shape {value.shape}"
                    )
            elif value.ndim != rank:
                raise ShapeError(
                    f"argument {name} of {self.out_name} is indexed with {rank} "
                    f"indices but has shape {value.shape} ({value.ndim} dimensions)"
                )
            out[name] = value.astype(np.float64, copy=False) if convert else value
        return out

    def _params(self, arg_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
        for name, shape in arg_shapes.items():
            if any(n < 1 for n in shape):
                raise ShapeError(
                    f"argument {name} of {self.out_name} has shape {tuple(shape)}: index "
                    "functions need every size to be at least 1"
                )
        params = {
            f"{name}.shape[{d}]": n
            for name, shape in arg_shapes.items()
            for d, n in enumerate(shape)
        }
        if self.jacobian_of is not None:
            fn, _ = self.jacobian_of
            out = fn.output_shape(**{a: arg_shapes[a] for a in fn.args})
            params.update({size_param(fn.grad_name, k): n for k, n in enumerate(out)})
        for canonical, other, var in self.equal_sizes:
            if params[canonical] != params[other]:
                raise ShapeError(
                    f"index {var!r} runs over dimension {canonical} = {params[canonical]} and "
                    f"{other} = {params[other]} in {self.out_name}: these sizes must be equal"
                )
        return params

    def output_shape(self, **arg_shapes: tuple[int, ...]) -> tuple[int, ...]:
        """The output shape for arguments of the given shapes (no data needed).

        Every access is checked for these shapes on the way (once per shapes: the result is
        remembered).

        Raises:
            ShapeError: sizes that must agree do not, or an output size that cannot be
                inferred.
            BoundsError: an access out of bounds.

        Example:
            >>> define("y[t] = sum[k](x[2*t+k] * w[k])").output_shape(x=(9,), w=(3,))
            (4,)
        """
        arg_shapes = {k: tuple(int(n) for n in v) for k, v in arg_shapes.items()}
        key = tuple(sorted(arg_shapes.items()))
        hit = self._checked.get(key)
        if hit is not None:
            return hit
        for name in self.args:
            rank, shape = self.arg_ranks[name], arg_shapes.get(name)
            if shape is None:
                raise InputError(f"{self.out_name} needs the shape of argument {name}")
            if len(shape) < rank or (len(shape) > rank and name not in self.shape_only):
                raise ShapeError(
                    f"argument {name} of {self.out_name} is indexed with {rank} indices but "
                    f"has shape {shape} ({len(shape)} dimensions)"
                )
        params = self._params(arg_shapes)
        if self.parent is not None:
            self._check_parent(arg_shapes)
        shape = shapes.output_shape(
            self.sites, self.out_vars, self.out_ranges, params, arg_shapes, self.out_name
        )
        self._checked[key] = shape
        return shape

    def _check_parent(self, arg_shapes: Mapping[str, tuple[int, ...]]) -> None:
        parent, _ = self.parent
        grad_name = self.args[-1]
        expected = parent.output_shape(**{a: arg_shapes[a] for a in parent.args})
        if tuple(arg_shapes[grad_name]) != expected:
            raise ShapeError(
                f"{grad_name} must have the shape of {parent.out_name}, {expected}, "
                f"got {tuple(arg_shapes[grad_name])}"
            )

    # -- evaluation -----------------------------------------------------------------------------
    def __call__(self, **arrays: object):
        """Evaluate with the compiled kernels: on tadiff Tensors as a recorded engine op, on
        NumPy arrays as an array.

        With at least one :class:`tadiff.Tensor` argument the result is a Tensor and its
        backward runs the compiled derivative kernels — differentiable again under
        ``create_graph``. With only arrays (or numbers) it is :meth:`evaluate`: float32 when
        every float argument is float32, else float64. The reference interpreter, the oracle
        every backend is tested against, is :meth:`reference`.

        Raises:
            ShapeError: wrong number of dimensions, sizes that must agree do not.
            BoundsError: an access would leave its argument for these shapes (checked first).

        Example:
            >>> f = define("y[i] = sum[k](x[i+k] * w[k])")
            >>> f(x=np.arange(4.0), w=np.ones(2)).tolist()
            [1.0, 3.0, 5.0]
        """
        if any(isinstance(v, Tensor) for v in arrays.values()):
            from tadiff.index.compile.engine_op import call_engine

            # call_engine checks the arguments (once per layout, before compiling for it)
            return call_engine(self, arrays, self.backend)
        return self.evaluate(arrays)

    def reference(self, **arrays: object) -> np.ndarray:
        """Evaluate by the reference interpreter: float64, one element at a time, every sum an
        exact integer loop and every access checked — slow on purpose, the oracle of the
        compiled backends.

        Example:
            >>> f = define("y[i] = sum[k](x[i+k] * w[k])")
            >>> f.reference(x=np.arange(4.0), w=np.ones(2)).tolist()
            [1.0, 3.0, 5.0]
        """
        values = self._arrays(arrays)
        arg_shapes = {k: v.shape for k, v in values.items()}
        out_shape = self.output_shape(**arg_shapes)
        check_memory({self.out_name: (out_shape, "output")}, 8)
        params = self._params(arg_shapes)
        return interpret.evaluate(self.out_vars, out_shape, self.body, values, params)

    def evaluate(self, arrays: Mapping[str, object], backend: str | None = None) -> np.ndarray:
        """Evaluate on NumPy arrays with a compiled, cached kernel.

        Args:
            arrays: argument name -> array. The result is float32 when every float argument
                is float32, else float64.
            backend: ``"auto"`` (einsum for contractions, else vectorized NumPy), ``"einsum"``,
                ``"numpy"`` or ``"numba"``; default this function's :attr:`backend`.

        Returns:
            The output array.

        Example:
            >>> f = define("y[i] = sum[k](x[i+k] * w[k])")
            >>> f.evaluate({"x": np.arange(4.0), "w": np.ones(2)}).tolist()
            [1.0, 3.0, 5.0]
        """
        from tadiff.index.compile.engine_op import evaluate_arrays

        checked = self._arrays(arrays, convert=False)
        return evaluate_arrays(self, checked, backend or self.backend)

    def using(self, backend: str) -> TensorFunction:
        """This function with another default kernel backend (for Tensor calls and evaluate).

        Example:
            >>> define("y[i] = x[i] * 2").using("numpy").backend
            'numpy'
        """
        from tadiff.index.compile.cache import BACKENDS

        if backend not in BACKENDS:
            raise InputError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
        # derivatives do not depend on the backend: the twin shares them (and the shape checks)
        twin = dataclasses.replace(self, _grads=self._grads, _checked=self._checked)
        twin.backend = backend
        return twin

    def source(
        self,
        backend: str = "numba",
        shapes: Mapping[str, tuple[int, ...]] | None = None,
        dtype: object = np.float64,
    ) -> str:
        """The generated kernel source: ``"numba"`` (the scheduled loop nests of every stage)
        or ``"triton"`` (one program per block of output elements).

        Args:
            backend: ``"numba"`` or ``"triton"``.
            shapes: argument name -> shape the schedule is planned for (the loop order and the
                stages can depend on the sizes); default: every dimension 64 (derivatives:
                their forward's arguments 64 and the incoming gradient of the forward's shape).
            dtype: the compute dtype (numba sources type their constants).

        Raises:
            MissingDependencyError: numba is not installed.
        """
        if backend == "triton":
            from tadiff.index.compile.triton_backend import triton_source

            return triton_source(self)
        if backend != "numba":
            raise InputError(f"only the numba and triton backends generate source, not {backend!r}")
        try:
            import numba  # noqa: F401 - the source is for numba: say so where it is missing
        except ImportError as e:
            raise MissingDependencyError("source('numba')", "numba", "numba") from e
        from tadiff.index.compile.numba_backend import numba_source

        return numba_source(self, shapes or example_shapes(self), dtype)

    def explain(
        self, dtype: object = np.float64, backend: str | None = None, **shapes: tuple[int, ...]
    ) -> str:
        """How this function and its derivatives are computed for these argument shapes.

        For the forward and for the derivative with respect to each argument (reading the
        forward's saved output, as the engine's backward does): the stages, each stage's loop
        order and the level its subexpressions are computed at, the saved values read, the
        estimated operations, loads and stores, the memory of arguments and temporaries, and
        the backend each stage runs on; then the derivatives the backward computes in one nest
        because they share their loops.

        Args:
            dtype: the compute dtype.
            backend: the backend asked for; default this function's :attr:`backend`.
            **shapes: argument name -> shape.

        Returns:
            The plan as text (print it).

        Example:
            >>> f = define("K[i,j] = exp(-sum[q]((a[i,q] - b[j,q])**2))")
            >>> text = f.explain(a=(100, 3), b=(80, 3))
            >>> "reads the saved forward value K" in text
            True
        """
        from tadiff.index.compile.lower import stage_backends
        from tadiff.index.compile.schedule import plan_gradients, plan_program

        backend = backend or self.backend
        self._arrays({n: np.empty(s) for n, s in shapes.items()}, convert=False)
        out_shape = self.output_shape(**shapes)
        parts = []
        plans = [("forward", self, dict(shapes), None)]
        for name in self.args:
            grad = self.grad(name)
            known = {} if self.out_name in grad.args else {self.out_name: (self, out_shape)}
            plans.append(
                (f"gradient wrt {name}", grad, {**shapes, self.grad_name: out_shape}, known)
            )
        for title, fn, arg_shapes, known in plans:
            program = plan_program(fn, arg_shapes, dtype, known)
            on = ", ".join(stage_backends(program, backend))
            parts.append(f"== {title} (stages on: {on})\n{program.explain()}")
        known = {self.out_name: (self, out_shape)}
        together = plan_gradients(self, self.args, plans[-1][2], dtype, known)
        if together.fused:
            parts.append("== the backward's derivatives together (Numba)\n" + together.explain())
        return "\n\n".join(parts)

    # -- derivatives ----------------------------------------------------------------------------
    def grad(self, wrt: str) -> TensorFunction:
        """The derivative with respect to argument ``wrt``, again a TensorFunction.

        It is the vector-Jacobian product: it takes this function's arguments plus the incoming
        gradient ``d<out_name>`` (shaped like the output) and returns ``d<wrt>`` shaped like
        ``wrt``, element by element in gather form.

        Example:
            >>> print(define("y[i] = exp(x[i])").grad("x"))
            dx[i] = dy[i] * exp(x[i])
        """
        if wrt not in self.args:
            raise InputError(
                f"{self.out_name} has no argument {wrt!r}; arguments: {', '.join(self.args)}"
            )
        if wrt not in self._grads:
            from tadiff.index.compile.cache import record_derivation
            from tadiff.index.derive import derive

            start = time.perf_counter()
            self._grads[wrt] = derive(self, wrt)
            record_derivation(time.perf_counter() - start)
        return self._grads[wrt]

    def jacobian(self, wrt: str) -> TensorFunction:
        """The element-wise Jacobian ``J[α, β] = ∂out[α] / ∂wrt[β]`` (tech report 5.3).

        It is :meth:`grad` with the incoming gradient replaced by a Kronecker delta
        ``d<out>[α'] -> [α == α']``, so it has the output indices of this function followed by
        those of ``wrt`` and takes only this function's arguments.

        Example:
            >>> print(define("y[i] = x[2*i]").jacobian("x"))
            Jx[i, p] = where(p % 2 == 0 and p + 2 <= 2*dy.shape[0] and 2*i == p, 1, 0)
        """
        grad = self.grad(wrt)
        taken = set(grad.out_vars) | {
            v for n in walk(grad.body) for v in (*free_indices(n), getattr(n, "var", ""))
        }
        gammas = []
        for v in self.out_vars:
            gammas.append(fresh_name(v, taken))
            taken.add(gammas[-1])
        body = _replace_access(grad.body, self.grad_name, tuple(gammas))
        ranges = tuple(
            r
            if r is not None
            else ((Affine.constant(0),), (Affine.variable(size_param(self.grad_name, k)) - 1,))
            for k, r in enumerate(self.out_ranges)
        )
        return TensorFunction(
            out_name=fresh_name(f"J{wrt}", set(self.args)),
            out_vars=(*gammas, *grad.out_vars),
            out_ranges=(*ranges, *grad.out_ranges),
            args=self.args,
            arg_ranks=dict(self.arg_ranks),
            body=simplify(
                body, _range_facts((*gammas, *grad.out_vars), (*ranges, *grad.out_ranges))
            ),
            equal_sizes=self.equal_sizes,
            jacobian_of=(self, wrt),
        )

    def grad_reads_output(self, wrt: str) -> bool:
        """Whether the kernels of :meth:`grad` ``(wrt)`` read this function's output instead of
        recomputing it (its formula contains the forward's body): the engine then saves the
        output for the backward, as torch does for ``exp`` or ``sigmoid``.

        Example:
            >>> define("y[i] = exp(x[i])").grad_reads_output("x")
            True
            >>> define("y[i] = x[i] * w[i]").grad_reads_output("x")
            False
        """
        hit = self._reads_output.get(wrt)
        if hit is None:
            from tadiff.index.compile.rewrite import Known, reuse_known

            grad = self.grad(wrt)
            own = Known(self.out_name, tuple(self.out_vars), self.body)
            hit = self.out_name not in grad.args and reuse_known(grad.body, [own]) is not grad.body
            self._reads_output[wrt] = hit
        return hit

    @property
    def grad_name(self) -> str:
        """Name of the incoming-gradient argument of this function's derivatives."""
        name = f"d{self.out_name}"
        while name in self.args:
            name = f"{name}_"
        return name

    def vjp(self, grad_out: object, **arrays: object) -> dict[str, np.ndarray]:
        """Gradients of ``sum(grad_out * f(**arrays))`` with respect to every argument.

        Example:
            >>> f = define("y[i] = x[i] * w[i]")
            >>> g = f.vjp(np.ones(2), x=np.array([1.0, 2.0]), w=np.array([3.0, 4.0]))
            >>> g["x"].tolist(), g["w"].tolist()
            ([3.0, 4.0], [1.0, 2.0])
        """
        from tadiff.index.compile.engine_op import evaluate_arrays, saved_output

        checked = self._arrays(arrays, convert=False)
        out = self.evaluate(checked)
        grads = {}
        for name in self.args:
            derivative = self.grad(name)
            inputs = {**checked, self.grad_name: np.asarray(grad_out)}
            saved = saved_output(self, derivative, out)
            grads[name] = evaluate_arrays(derivative, inputs, self.backend, saved)
        return grads

    # -- printing -------------------------------------------------------------------------------
    def __str__(self) -> str:
        if self.written is not None:
            return printer.function_text(
                self.out_name, self.out_vars, self.written, self.written_sizes, self.args
            )
        return printer.function_text(
            self.out_name, self.out_vars, self.body, self._header_sizes(), self.args
        )

    def _header_sizes(self) -> list[Affine | None]:
        """The output sizes the text must state: those that reading it back would not infer.

        Reading back infers a range from the printed body; it is left out where that is this
        function's range for every consistent call — the same size, or one equal to it because
        both run over one index (``equal_sizes``) or the incoming gradient has the forward's
        shape.
        """
        if self.jacobian_of is not None:  # its leading sizes are the forward's output shape
            return [_constant(_size_of(r)) for r in self.out_ranges]
        same = self._same_size()
        printed = ir.unshadow(self.body, (*self.out_vars, *self.args))  # as the text reads
        inferred, _ = shapes.output_ranges(
            printed, {}, self.out_vars, (None,) * len(self.out_vars), sure=False
        )
        sizes = []
        for r, guess in zip(self.out_ranges, inferred, strict=True):
            size = _size_of(r)
            if size is not None and size.is_constant:
                sizes.append(size)  # i:4 reads best, and always reads back
            elif (
                guess is not None
                and size is not None
                and {same(size)} == {same(b + 1) for b in guess[1]}
            ):
                sizes.append(None)
            else:
                sizes.append(size)
        return sizes

    def _same_size(self):
        """A normal form of sizes: equal sizes map to one expression."""
        alias = {other: canonical for canonical, other, _ in self.equal_sizes}
        known: dict[str, Affine] = {}
        if self.parent is not None:
            parent, _ = self.parent
            alias.update({o: c for c, o, _ in parent.equal_sizes})
            for k, r in enumerate(parent.out_ranges):
                size = _size_of(r)
                if size is not None:
                    known[size_param(self.args[-1], k)] = size

        def normal(a: Affine) -> Affine:
            a = a.substitute({k: v for k, v in known.items() if k in a.variables})
            return a.substitute(
                {k: Affine.variable(v) for k, v in alias.items() if k in a.variables}
            )

        return normal

    def __repr__(self) -> str:
        return f"TensorFunction({str(self)!r})"

    def latex(self) -> str:
        """The definition as LaTeX."""
        body = self.body if self.written is None else shapes.close(self.written, self.sum_ranges)
        return printer.function_latex(self.out_name, self.out_vars, body, self.args)

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    @property
    def size_params(self) -> frozenset[str]:
        """Size parameters (``x.shape[1]``) the definition depends on."""
        names: set[str] = set()
        for r in self.out_ranges:
            for side in r or ():
                for a in side:
                    names.update(a.variables)
        for node in walk(self.body):
            for a in index_exprs(node):
                names.update(v for v in a.variables if is_param(v))
        return frozenset(names)


def example_shapes(fn: TensorFunction, size: int = 64) -> dict[str, tuple[int, ...]]:
    """Argument shapes with every free dimension ``size`` (a derivative's incoming gradient gets
    its forward's output shape), for showing a schedule without data."""
    if fn.parent is not None or fn.jacobian_of is not None:
        parent, _ = fn.parent or fn.jacobian_of
        shapes = example_shapes(parent, size)
        if fn.parent is not None:
            shapes[fn.args[-1]] = parent.output_shape(**shapes)
        return {a: shapes[a] for a in fn.args}
    return {a: (size,) * fn.arg_ranks[a] for a in fn.args}


def _constant(size: Affine | None) -> Affine | None:
    return size if size is not None and size.is_constant else None


def _size_of(r: shapes.Range | None) -> Affine | None:
    """The size ``n`` of a range ``0..n-1`` with one integral upper bound, else None."""
    if r is None or len(r[0]) != 1 or len(r[1]) != 1 or r[0][0] != 0 or not r[1][0].is_integral:
        return None
    return r[1][0] + 1


def _range_facts(variables: tuple[str, ...], ranges: tuple) -> tuple[Cond, ...]:
    facts = []
    for var, (lower, upper) in zip(variables, ranges, strict=True):
        v = Affine.variable(var)
        facts += [Cond.ge(v - b) for b in lower] + [Cond.ge(b - v) for b in upper]
    return tuple(facts)


def _replace_access(node: Node, name: str, gammas: tuple[str, ...]) -> Node:
    """Replace every ``name[e]`` by the delta ``[gammas == e]``."""

    def delta(n: Node) -> Node | None:
        if not (isinstance(n, Access) and n.name == name):
            return None
        conds = [Cond.eq(Affine.variable(g) - e) for g, e in zip(gammas, n.indices, strict=True)]
        return ir.where(conds, ir.ONE)

    return ir.rebuild(node, delta)


def define(source: str) -> TensorFunction:
    """Define a tensor function element by element in index notation.

    Args:
        source: e.g. ``"y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])"``. Sum ranges written
            without bounds and output sizes written without ``:N`` are inferred from the argument
            shapes (see docs/index-notation.md); ``sum[k=0:5]`` gives a half-open range explicitly.

    Returns:
        A :class:`TensorFunction`; call it with NumPy arrays as keyword arguments.

    Raises:
        ParseError: with the column at fault.
        DerivationError: a sum range that cannot be inferred.

    Example:
        >>> f = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
        >>> f.output_shape(x=(2, 3, 9), w=(4, 3, 3))
        (2, 4, 4)
    """
    d = parse(source)
    out_ranges, out_equal = shapes.output_ranges(d.body, d.sum_ranges, d.out_vars, d.out_sizes)
    equal = tuple(dict.fromkeys((*d.equal_sizes, *out_equal)))
    # sizes that must be equal are used under one name, so the derivation sees them as one
    alias: dict[str, str] = {}
    for canonical, other, _ in equal:
        alias.setdefault(other, alias.get(canonical, canonical))
    renames = {k: Affine.variable(v) for k, v in alias.items()}
    body = ir.substitute_params(simplify(shapes.close(d.body, d.sum_ranges)), renames)
    out_ranges = tuple(
        None if r is None else tuple(tuple(_rename(a, alias) for a in side) for side in r)
        for r in out_ranges
    )
    return TensorFunction(
        out_name=d.out_name,
        out_vars=d.out_vars,
        out_ranges=out_ranges,
        args=tuple(d.arg_ranks),
        arg_ranks=dict(d.arg_ranks),
        body=body,
        equal_sizes=equal,
        written=d.body,
        written_sizes=d.out_sizes,
        sum_ranges=dict(d.sum_ranges),
        shape_only=d.shape_only,
    )


def _rename(a: Affine, alias: Mapping[str, str]) -> Affine:
    return a.substitute({k: Affine.variable(v) for k, v in alias.items() if k in a.variables})
