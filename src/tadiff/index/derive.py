"""Element-wise derivatives of index-notation functions (tech report sections 4–5).

For ``f[α] = body(α)`` and an argument ``x`` the derivative is the vector-Jacobian product

    dx[β] = Σ_{α in D, A α + c = β} df[α] · ∂body/∂x[Aα + c]

written in *gather* form: one formula per element β of ``dx``, with no scatter and no atomics.
The steps, each next to its code below:

1. **Reverse accumulation** over the scalar DAG (``_backprop``): the adjoint of the root is the
   incoming gradient ``df[α]``; each node passes ``adjoint · ∂node/∂child`` to its children
   (the table ``_PARTIALS``). A sum is *liberated*: its body is differentiated with the sum index
   added to α and the sum's range added to the domain D (section 5.2); a ``where`` adds its
   condition to D. Every access to ``x`` reached this way is an *occurrence* with its adjoint.
2. **Integer solve** (``_gather``): for an occurrence ``x[A α + c]`` solve ``A α = β - c`` over the
   integers (Smith normal form, ``tadiff.intlinalg``): ``α = A⁺(β - c) + K z`` when the cokernel
   equalities and the divisibility (integrality) conditions on β hold, for integer ``z``.
3. **Fourier–Motzkin** bounds ``z`` by substituting α into the domain's inequalities: nested sums
   over ``z`` with ``max(ceil(..))``/``min(floor(..))`` bounds. A kernel coordinate that is
   a shifted original index keeps that index's name (``t`` in a convolution).
4. Conditions without any ``z`` become deltas (``where``); those implied by ``dx``'s own range
   are dropped, as are sum bounds implied by the others. Contributions of repeated occurrences
   are added.

Sizes stay symbolic (``x.shape[2]``), so one derivation serves every shape; the result is again a
:class:`~tadiff.index.function.TensorFunction`, which can be differentiated again.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd, lcm

from tadiff.errors import DerivationError, ParseError
from tadiff.index import expr as ir
from tadiff.index.expr import (
    ONE,
    ZERO,
    Access,
    Affine,
    Cond,
    Node,
    Op,
    Sum,
    Where,
    free_indices,
    fresh_name,
    is_param,
    size_param,
)
from tadiff.index.parse import MAX_DEPTH, MAX_NESTING, parse
from tadiff.index.simplify import simplify, sum_or_point
from tadiff.intlinalg import IntegerSolver, fourier_motzkin

__all__ = ["Occurrence", "derive", "occurrences", "output_ranges"]


# -- local partial derivatives: one line per operation ------------------------------------------


def _half_step(d: Node, sign: float) -> tuple[Node, Node]:
    # (1 ± sign(d)) / 2: 1 on one side, 0 on the other, 1/2 at a tie
    return ir.const(0.5), ir.add(ONE, ir.mul(ir.const(sign), ir.apply("sign", d)))


# a partial is a node, or a tuple of factors that multiply the adjoint one after the other
# (adjoint * 2 * x, not adjoint * (2 * x): a flat product reads better and keeps constants first)
_PARTIALS = {
    "add": lambda n, a, b: (ONE, ONE),
    "sub": lambda n, a, b: (ONE, ir.const(-1.0)),
    "mul": lambda n, a, b: (b, a),
    "div": lambda n, a, b: (ir.div(ONE, b), ir.neg(ir.div(n, b))),
    "pow": lambda n, a, b: (
        (b, ir.power(a, ir.sub(b, ONE))),
        (n, ir.apply("log", a)),
    ),
    "neg": lambda n, a: (ir.const(-1.0),),
    "exp": lambda n, a: (n,),
    "log": lambda n, a: (ir.div(ONE, a),),
    "sin": lambda n, a: (ir.apply("cos", a),),
    "cos": lambda n, a: (ir.neg(ir.apply("sin", a)),),
    "tan": lambda n, a: (ir.add(ONE, ir.power(n, ir.const(2.0))),),
    "tanh": lambda n, a: (ir.sub(ONE, ir.power(n, ir.const(2.0))),),
    "sqrt": lambda n, a: (ir.div(ir.const(0.5), n),),
    "abs": lambda n, a: (ir.apply("sign", a),),
    "sign": lambda n, a: (ZERO,),
    "sigmoid": lambda n, a: ((n, ir.sub(ONE, n)),),
    # ties split the subgradient evenly: d max(a, b) = 1/2 da + 1/2 db at a == b, which is what
    # a central difference measures and keeps max(a, a) = a with derivative 1
    "maximum": lambda n, a, b: (_half_step(ir.sub(a, b), 1.0), _half_step(ir.sub(a, b), -1.0)),
    "minimum": lambda n, a, b: (_half_step(ir.sub(a, b), -1.0), _half_step(ir.sub(a, b), 1.0)),
}


# -- step 1: reverse accumulation -----------------------------------------------------------------


@dataclass(frozen=True)
class Occurrence:
    """An access ``x[indices]`` of the differentiated argument, reached with ``adjoint``, inside
    the liberated sums ``sums`` (``(index, lower bounds, upper bounds)``, outermost first) and
    under the conditions ``conds``: the derivative adds ``adjoint`` into ``dx[indices]`` at every
    point of the forward's iteration space where ``conds`` hold (its *scatter* form)."""

    access: Access
    adjoint: Node
    sums: tuple[tuple[str, tuple[Affine, ...], tuple[Affine, ...]], ...]
    conds: tuple[Cond, ...]


def _scope_order(root: Node) -> list[Node]:
    """Nodes of one scope (not entering sums or where branches), children before parents."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            if isinstance(node, Op):
                stack.extend((c, False) for c in node.args)
    return order


def _backprop(
    root: Node,
    seed: Node,
    wrt: str,
    sums: tuple,
    conds: tuple[Cond, ...],
    bound: frozenset[str],
    out: list[Occurrence],
) -> None:
    reads: set[int] = set()  # nodes whose subtree reads the argument (children first)
    for node in ir.walk(root):
        if (isinstance(node, Access) and node.name == wrt) or any(
            id(c) in reads for c in node.children()
        ):
            reads.add(id(node))

    def depends(node: Node) -> bool:
        return id(node) in reads

    # contributions are summed when a node is reached (balanced: a node used many times gets
    # a shallow sum of its adjoints, not a chain as deep as its uses)
    adjoints: dict[int, list[Node]] = {id(root): [seed]}
    for node in reversed(_scope_order(root)):
        parts = adjoints.get(id(node))
        if parts is None or not depends(node):
            continue
        adjoint = ir.add_all(parts)
        if isinstance(node, Access):
            out.append(Occurrence(node, adjoint, sums, conds))
        elif isinstance(node, Op):
            partials = _PARTIALS[node.op](node, *node.args)
            for pos, (child, partial) in enumerate(zip(node.args, partials, strict=True)):
                if depends(child):
                    if node.op == "div" and pos == 0:  # adjoint / b, not adjoint * (1/b)
                        contribution = ir.div(adjoint, node.args[1])
                    else:
                        contribution = adjoint
                        for factor in partial if isinstance(partial, tuple) else (partial,):
                            contribution = ir.mul(contribution, factor)
                    adjoints.setdefault(id(child), []).append(contribution)
        elif isinstance(node, Sum):
            var, body = node.var, node.body
            if var in bound:  # a nested sum reusing a name: keep every liberated index distinct
                var = fresh_name(node.var, bound | free_indices(body))
                body = ir.substitute(body, {node.var: Affine.variable(var)})
            liberated = (*sums, (var, node.lower, node.upper))
            _backprop(body, adjoint, wrt, liberated, conds, bound | {var}, out)
        elif isinstance(node, Where):
            _backprop(node.then, adjoint, wrt, sums, (*conds, *node.conds), bound, out)
            negated = node.conds[0].negated() if len(node.conds) == 1 else None
            if negated is not None:
                _backprop(node.other, adjoint, wrt, sums, (*conds, negated), bound, out)
            else:  # not (a and b) is no single condition: keep it as a where on the adjoint
                masked = ir.where(node.conds, ZERO, adjoint)
                _backprop(node.other, masked, wrt, sums, conds, bound, out)


# -- implication checks (Fourier–Motzkin over the rationals) --------------------------------------


def _implied(facts: tuple[Affine, ...], claim: Affine) -> bool:
    """True if ``claim >= 0`` holds at every integer point where all ``facts >= 0`` hold.

    Shown by refuting ``claim <= -1`` (the integer negation) over the rationals, so a False
    answer may be a missed proof, never a wrong one.
    """
    negation = -Cond.ge(claim).expr - 1
    names = sorted(set().union(negation.variables, *(f.variables for f in facts)))
    nest = fourier_motzkin([*facts, negation], names)
    return not nest.is_feasible({})


def _implied_rationally(facts: tuple[Affine, ...], claim: Affine) -> bool:
    """True if ``claim >= 0`` holds at every *rational* point where all ``facts >= 0`` hold.

    Weaker than :func:`_implied` (no integer rounding): used to drop sum bounds, so that what is
    kept still proves every access in bounds over the rational relaxation that the bounds
    checker (:func:`tadiff.index.shapes.check_bounds`) and a later derivation reason over.
    Dropping ``i <= q - 1`` next to ``i <= 0`` because ``2*q == p + 1, p >= 0`` forces the
    integer ``q >= 1`` would leave a sum whose range reaches ``i = -1`` at the rational
    ``q = 1/2``.

    The integer check is run on the homogenized system (each constant ``c`` becomes ``c*h`` with
    a fresh ``h >= 1``): its integer points are the rational points of the original scaled by
    a common denominator, so integer rounding can no longer cut anything off.
    """
    names = set().union(claim.variables, *(f.variables for f in facts))
    h = Affine.variable(fresh_name("_h", names))

    def homogenized(a: Affine) -> Affine:
        den = lcm(*(c.denominator for _, c in a.items()), a.const.denominator)
        return (a - a.const) * den + h * (a.const * den)

    return _implied((*(homogenized(f) for f in facts), h - 1), homogenized(claim))


# -- steps 2-4: gather form for one occurrence ----------------------------------------------------


def _range_constraints(var: str, lower, upper) -> list[Affine]:
    v = Affine.variable(var)
    return [v - b for b in lower] + [b - v for b in upper]


def _gather(
    occ: Occurrence,
    out_vars: tuple[str, ...],
    out_ranges: tuple,
    beta: tuple[str, ...],
    facts: tuple[Affine, ...],
    taken: set[str],
) -> Node:
    alphas = list(out_vars) + [s[0] for s in occ.sums]
    index = {name: k for k, name in enumerate(alphas)}

    # step 2: A α = β - c, rows scaled to integers (indices of derived functions may be fractional)
    matrix, rhs = [], []
    for e, b in zip(occ.access.indices, beta, strict=True):
        coeffs = [e.coeff(a) for a in alphas]
        scale = lcm(*(c.denominator for c in coeffs)) if coeffs else 1
        matrix.append([int(c * scale) for c in coeffs])
        rest = e - sum((e.coeff(a) * Affine.variable(a) for a in alphas), Affine.constant(0))
        rhs.append((Affine.variable(b) - rest) * scale)
    solver = IntegerSolver(matrix, ncols=len(alphas))
    solution = solver.solve_affine(rhs)
    conds: list[Cond] = [Cond.eq(e) for e in solution.equalities]
    conds += [Cond.mod(e, d) for e, d in solution.congruences]
    kernel = solution.kernel
    free = len(kernel[0]) if kernel else 0

    # name kernel coordinates after an original index where one is that index up to a shift:
    # alpha_m = p_m ± z_j  =>  loop over alpha_m itself
    z_expr: list[Affine] = []
    loop_vars: list[str] = []
    used_rows: set[int] = set()
    for j in range(free):
        row = next(
            (
                m
                for m in range(len(alphas))
                if m not in used_rows
                and abs(kernel[m][j]) == 1
                and all(kernel[m][jj] == 0 for jj in range(free) if jj != j)
            ),
            None,
        )
        if row is None:
            name = fresh_name("z", taken)
            z_expr.append(Affine.variable(name))
        else:
            used_rows.add(row)
            name = alphas[row] if alphas[row] not in taken else fresh_name(alphas[row], taken)
            z_expr.append((Affine.variable(name) - solution.particular[row]) * kernel[row][j])
        taken.add(name)
        loop_vars.append(name)
    alpha_of = {
        a: solution.particular[m]
        + sum((kernel[m][j] * z_expr[j] for j in range(free)), Affine.constant(0))
        for m, a in enumerate(alphas)
    }
    # loops in the order of the original indices they stand for (outer first), fresh ones last
    order = {name: (alphas.index(name) if name in index else len(alphas)) for name in loop_vars}
    loop_vars.sort(key=lambda n: order[n])

    # step 3: the domain in the new coordinates
    domain: list[Affine] = []
    for var, r in zip(out_vars, out_ranges, strict=True):
        domain += _range_constraints(var, *r)
    for var, lower, upper in occ.sums:
        domain += _range_constraints(var, lower, upper)
    inner_conds: list[Cond] = []
    loop_set = set(loop_vars)
    for cond in occ.conds:
        if cond.kind == "ge":
            domain.append(cond.expr)
        elif cond.kind == "eq":
            e = cond.expr.substitute(alpha_of)
            if e.variables & loop_set:  # pins a loop variable: Fourier–Motzkin gets both sides
                domain += [cond.expr, -cond.expr]
            else:  # a delta on dx's indices
                conds.append(Cond.eq(e))
        else:
            inner_conds.append(cond)
    domain = [c.substitute(alpha_of) for c in domain]
    outer = [c for c in domain if not (c.variables & loop_set)]
    inner = [c for c in domain if c.variables & loop_set]
    conds += [Cond.ge(c) for c in outer]
    base_facts = facts
    facts = (*facts, *_congruence_facts(conds, facts))
    conds = [c for c in dict.fromkeys(conds) if not (c.kind == "ge" and _implied(facts, c.expr))]

    body = ir.where(
        [c.substitute(alpha_of) for c in inner_conds], ir.substitute(occ.adjoint, alpha_of)
    )
    if loop_vars:
        nest = fourier_motzkin(inner, loop_vars)
        # sum bounds are pruned with rational facts only: the congruence facts (p >= 1 from
        # (p + 1) % 2 == 0) hold over the integers, and a where on a loop variable re-derived
        # later becomes an inner condition that no longer bounds that loop
        known = list(base_facts) + [c.expr for c in conds if c.kind == "ge"]
        ranges = []
        for rng in nest.ranges:
            if not rng.lower or not rng.upper:
                raise DerivationError(
                    f"derivative wrt {occ.access.name}: sum index {rng.variable} is unbounded"
                )
            lower = _prune_bounds(rng.lower, known, rng.variable, lower=True)
            upper = _prune_bounds(rng.upper, known, rng.variable, lower=False)
            lower, upper = _bound_order(lower), _bound_order(upper)
            ranges.append((rng.variable, lower, upper))
            known += _range_constraints(rng.variable, lower, upper)
        for var, lower, upper in reversed(ranges):
            body = sum_or_point(var, lower, upper, body)
    return ir.where(conds, body)


def _congruence_facts(conds: list[Cond], facts: tuple[Affine, ...]) -> list[Affine]:
    """Lower bounds that divisibility adds to ``v >= 0``: ``v % 2 == 1`` gives ``v >= 1``.

    Fourier–Motzkin reasons over the rationals and cannot see this; without it ``p >= 1`` would
    be printed next to ``(p + 1) % 2 == 0``.
    """
    tighter = []
    for c in conds:
        names = list(c.expr.variables)
        if c.kind != "mod" or len(names) != 1 or not c.expr.is_integral:
            continue
        if Affine.variable(names[0]) not in facts:  # only for an index known to be >= 0
            continue
        a, b = int(c.expr.coeff(names[0])), int(c.expr.const)
        if gcd(a, c.modulus) != 1:
            continue
        smallest = (-b * pow(a, -1, c.modulus)) % c.modulus  # least v >= 0 with a v + b ≡ 0
        tighter.append(Affine.variable(names[0]) - smallest)
    return tighter


def _prune_bounds(
    bounds: tuple[Affine, ...], known: list[Affine], var: str, lower: bool
) -> tuple[Affine, ...]:
    """Drop each bound that another bound of the same side implies, given the known facts."""
    kept = list(dict.fromkeys(bounds))
    for b in list(kept):
        others = [o for o in kept if o is not b]
        for o in others:
            # lower bounds: b is redundant if o >= b everywhere; upper: if o <= b
            claim = o - b if lower else b - o
            if _implied_rationally(tuple(known), claim):
                kept.remove(b)
                break
    return tuple(kept)


def _bound_order(bounds: tuple[Affine, ...]) -> tuple[Affine, ...]:
    # a fixed order makes the printed form reproducible: size-only bounds first, then by text
    return tuple(sorted(bounds, key=lambda b: (any(not is_param(v) for v in b.variables), str(b))))


# -- the derivative as a TensorFunction ---------------------------------------------------------


_BETA_NAMES = ("p", "q", "r", "s", "u", "v", "m", "n", "a", "b", "c", "e")


def _names_in(fn) -> set[str]:
    names = set(fn.out_vars)
    for node in ir.walk(fn.body):
        if isinstance(node, Sum):
            names.add(node.var)
        names |= free_indices(node)
    return names


def output_ranges(fn) -> tuple[tuple[tuple[Affine, ...], tuple[Affine, ...]], ...]:
    """The ``(lower bounds, upper bounds)`` of each of ``fn``'s output indices: as declared, or
    over the incoming gradient's axis (``0 .. dy.shape[k] - 1``) where the size is inferred."""
    return tuple(
        r
        if r is not None
        else ((Affine.constant(0),), (Affine.variable(size_param(fn.grad_name, k)) - 1,))
        for k, r in enumerate(fn.out_ranges)
    )


def occurrences(fn, wrt: str) -> list[Occurrence]:
    """The accesses of argument ``wrt`` in ``fn`` with their adjoints, seeded with the incoming
    gradient ``fn.grad_name[fn.out_vars]``: the derivative in scatter form, before the integer
    solve turns it into one formula per element of ``dx`` (step 1 of the module docstring).

    Example:
        >>> from tadiff.index.function import define
        >>> [occ] = occurrences(define("y[t] = sum[k](x[2*t + k] * w[k])"), "x")
        >>> print(occ.access, "+=", occ.adjoint, "for", [s[0] for s in occ.sums])
        x[k + 2*t] += dy[t] * w[k] for ['k']
    """
    seed = ir.access(fn.grad_name, tuple(Affine.variable(v) for v in fn.out_vars))
    found: list[Occurrence] = []
    _backprop(fn.body, seed, wrt, (), (), frozenset(fn.out_vars), found)
    return found


def derive(fn, wrt: str):
    """The derivative of ``fn`` with respect to argument ``wrt`` (see the module docstring).

    Args:
        fn: a :class:`~tadiff.index.function.TensorFunction`.
        wrt: the name of one of its arguments.

    Returns:
        A TensorFunction ``d<wrt>[β] = ...`` taking ``fn``'s arguments and the incoming gradient
        ``d<out>``; its output has the shape of ``wrt``.

    Example:
        >>> from tadiff.index.function import define
        >>> print(derive(define("y[i] = x[2*i]"), "x"))
        dx[p:x.shape[0]] = where(p % 2 == 0 and p + 2 <= 2*dy.shape[0], dy[p/2], 0)
    """
    from tadiff.index.function import TensorFunction

    grad_name = fn.grad_name
    used = _names_in(fn)
    tensors = {*fn.args, grad_name, fn.out_name}
    out_name = fresh_name(f"d{wrt}", tensors | used)
    tensors.add(out_name)
    alias = {other: canonical for canonical, other, _ in fn.equal_sizes}

    def size(dim: int) -> Affine:
        name = size_param(wrt, dim)
        return Affine.variable(alias.get(name, name))

    out_ranges = output_ranges(fn)
    found = occurrences(fn, wrt)

    # names of dx's indices: the index used plainly in that dimension of x, else a fresh letter
    # (never a tensor's name: the text must read back)
    used |= tensors
    beta: list[str] = []
    first = found[0].access.indices if found else ()
    for dim in range(fn.arg_ranks[wrt]):
        candidate = first[dim] if dim < len(first) else None
        plain = (
            candidate is not None
            and len(candidate.variables) == 1
            and candidate == Affine.variable(next(iter(candidate.variables)))
            and not is_param(next(iter(candidate.variables)))
        )
        name = next(iter(candidate.variables)) if plain else None
        if name is None or name in beta:
            name = next((n for n in _BETA_NAMES if n not in used and n not in beta), None)
            name = name or fresh_name("i", used | set(beta))
        beta.append(name)
    beta_t = tuple(beta)

    # what holds wherever dx is evaluated: its own index range, and sizes of at least 1
    facts: list[Affine] = []
    for dim, b in enumerate(beta_t):
        facts += [Affine.variable(b), size(dim) - 1 - Affine.variable(b)]
    params = {v for f in facts for v in f.variables if is_param(v)}
    params |= {
        v for r in out_ranges for side in r for a in side for v in a.variables if is_param(v)
    }
    facts += [Affine.variable(p) - 1 for p in sorted(params)]

    parts = []
    for occ in found:
        # loop variables may reuse sum and output index names, not dx's nor a tensor's
        taken = set(beta_t) | tensors
        parts.append(_gather(occ, fn.out_vars, out_ranges, beta_t, tuple(facts), taken))
    # the forward's sum over k may be nested where k is one of dx's indices: the body keeps
    # that (the same node serves both, which the scheduler exploits); the text renames it
    body = _sizes_through_gradient(simplify(ir.add_all(parts)), fn, grad_name)
    levels = ir.depth(body)
    if levels > MAX_DEPTH:
        raise DerivationError(
            f"the derivative of {fn.out_name} wrt {wrt} is {levels} levels deep, more than "
            f"{MAX_DEPTH}: split the definition into several"
        )

    args = tuple(dict.fromkeys((*fn.args, grad_name)))
    ranks = {**fn.arg_ranks, grad_name: len(fn.out_vars)}
    result = TensorFunction(
        out_name=out_name,
        out_vars=beta_t,
        out_ranges=tuple(((Affine.constant(0),), (size(d) - 1,)) for d in range(len(beta_t))),
        args=args,
        arg_ranks=ranks,
        body=body,
        equal_sizes=fn.equal_sizes,
        parent=(fn, wrt),
        shape_only=fn.shape_only,
    )
    if levels + 3 > MAX_NESTING:  # the text may nest deeper than the parser reads: try it
        try:
            parse(str(result))
        except ParseError as exc:
            raise DerivationError(
                f"the derivative of {fn.out_name} wrt {wrt} would print as a definition that "
                f"nests more than {MAX_NESTING} levels: split the definition into several"
            ) from exc
    return result


def _sizes_through_gradient(body: Node, fn, grad_name: str) -> Node:
    """Sizes of arguments the derivative does not read, written as the incoming gradient's
    where they are an output size of ``fn``: ``sum[i=0:dy.shape[0]](dy[i, j])`` rather than
    ``x.shape[0]``, so that the printed derivative names only what it reads."""
    read = {n.name for n in ir.walk(body) if isinstance(n, Access)}
    mapping = {}
    for k, r in enumerate(fn.out_ranges):
        if r is None or len(r[0]) != 1 or len(r[1]) != 1 or r[0][0] != 0:
            continue
        (upper,) = r[1]
        names = list(upper.variables)
        if len(names) == 1 and upper.coeff(names[0]) == 1 and upper.const == -1:
            param = names[0]
            if param.split(".shape[")[0] not in read and param not in mapping:
                mapping[param] = Affine.variable(size_param(grad_name, k))
    return ir.substitute_params(body, mapping) if mapping else body
