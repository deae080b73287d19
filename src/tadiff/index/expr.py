"""IR of the tensor-algebra language: affine indices, a hash-consed scalar DAG, sums, conditions.

An element-wise definition ``y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])`` is a scalar expression
of its index variables. Index expressions are :class:`~tadiff.intlinalg.affine.Affine` functions of
index variables and *size parameters*: the name ``x.shape[2]`` stands for the size of dimension 2
of argument ``x``, so one expression (and one derivation) serves every shape.

Scalar nodes are immutable and hash-consed: building the same expression twice returns the same
object, so a shared subexpression (the forward ``exp(u)`` reused in its derivative) is stored and
evaluated once, and ``a is b`` is structural equality. The constructors (:func:`add`, :func:`mul`,
...) fold constants and drop neutral elements as they build, which is most of the simplifier.

Node kinds:
    Const(value)                    a float constant
    Index(expr)                     the value of an index expression, as a number
    Access(name, indices)           element ``name[indices]`` of an argument
    Op(op, args)                    arithmetic and elementary functions (see ``UNARY``, ``BINARY``)
    Sum(var, lower, upper, body)    sum of body over max(ceil(lower)) <= var <= min(floor(upper))
    Where(conds, then, other)       ``then`` if every index condition holds, else ``other``

Example:
    >>> i, k = Affine.variable("i"), Affine.variable("k")
    >>> e = mul(access("x", (i, k)), const(1.0))
    >>> e is access("x", (i, k))
    True
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from math import gcd, lcm

from tadiff.intlinalg.affine import Affine

__all__ = [
    "BINARY",
    "UNARY",
    "Access",
    "Affine",
    "Cond",
    "Const",
    "Index",
    "Node",
    "Op",
    "Sum",
    "Where",
    "access",
    "add",
    "add_all",
    "apply",
    "associate",
    "const",
    "depth",
    "div",
    "free_indices",
    "index_exprs",
    "index_value",
    "is_param",
    "mul",
    "neg",
    "node_count",
    "power",
    "rebuild",
    "sub",
    "substitute",
    "substitute_params",
    "sum_over",
    "unshadow",
    "walk",
    "where",
    "written_construction",
]

UNARY = (
    "exp",
    "log",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sqrt",
    "abs",
    "sign",
    "sigmoid",
)
"""Elementary functions of one argument, callable by name in the DSL."""

BINARY = ("maximum", "minimum")
"""Elementary functions of two arguments, callable by name in the DSL."""


def is_param(name: str) -> bool:
    """True for a size parameter such as ``x.shape[2]``, False for an index variable."""
    return "." in name


def size_param(arg: str, dim: int) -> str:
    """The parameter name for the size of dimension ``dim`` of argument ``arg``: ``x.shape[2]``."""
    return f"{arg}.shape[{dim}]"


# -- conditions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cond:
    """An index condition: ``expr >= 0`` (kind "ge"), ``expr == 0`` ("eq"), ``expr != 0`` ("ne")
    or ``expr ≡ 0 (mod modulus)`` ("mod"), over index variables and size parameters.

    Example:
        >>> Cond.eq(Affine.variable("i") - Affine.variable("j")).holds({"i": 2, "j": 2})
        True
    """

    kind: str
    expr: Affine
    modulus: int = 0

    @staticmethod
    def ge(expr: Affine) -> Cond:
        """``expr >= 0``."""
        return Cond("ge", _normal("ge", expr))

    @staticmethod
    def eq(expr: Affine) -> Cond:
        """``expr == 0`` (a Kronecker delta)."""
        return Cond("eq", _normal("eq", expr))

    @staticmethod
    def ne(expr: Affine) -> Cond:
        """``expr != 0``."""
        return Cond("ne", _normal("ne", expr))

    @staticmethod
    def mod(expr: Affine, modulus: int) -> Cond:
        """``expr ≡ 0 (mod modulus)`` (an integrality condition)."""
        # reduce the coefficients modulo the modulus where they are integers: 2*i + 4 ≡ 2*i (mod 4)
        if expr.is_integral:
            coeffs = {name: int(c) % modulus for name, c in expr.items()}
            expr = Affine({k: v for k, v in coeffs.items() if v}, int(expr.const) % modulus)
        return Cond("mod", expr, int(modulus))

    def holds(self, values: Mapping[str, int]) -> bool:
        """Evaluate the condition for concrete integer ``values`` of its variables."""
        value = self.expr.evaluate(values)
        if self.kind == "ge":
            return value >= 0
        if self.kind == "eq":
            return value == 0
        if self.kind == "ne":
            return value != 0
        return value.denominator == 1 and value.numerator % self.modulus == 0

    def constant_truth(self) -> bool | None:
        """True/False when the condition does not depend on any name, else None."""
        if not self.expr.is_constant:
            return None
        return self.holds({})

    def negated(self) -> Cond | None:
        """The negation as one condition, or None where it is not one (a congruence)."""
        if self.kind == "ge":
            return Cond.ge(-self.expr - 1)
        if self.kind == "eq":
            return Cond.ne(self.expr)
        if self.kind == "ne":
            return Cond.eq(self.expr)
        return None

    def substitute(self, mapping: Mapping[str, Affine]) -> Cond:
        expr = self.expr.substitute(mapping)
        if self.kind == "mod":
            return Cond.mod(expr, self.modulus)
        return getattr(Cond, self.kind)(expr)


def _normal(kind: str, expr: Affine) -> Affine:
    """``expr`` scaled to coprime integer coefficients, so equal conditions are equal objects.

    ``e >= 0``, ``e == 0`` and ``e != 0`` keep their meaning under positive scaling (and the last
    two under negation, so their leading coefficient is made positive). With integer variables
    the constant of ``sum(a_i v_i) + c >= 0`` can be rounded down to a multiple of the gcd, and an
    equality whose constant is not such a multiple never holds.
    """
    values = [c for _, c in expr.items()]
    den = lcm(*(v.denominator for v in [*values, expr.const]))
    nums = [int(v * den) for v in values]
    const = expr.const * den
    g = 0
    for n in nums:
        g = gcd(g, n)
    if g == 0:
        return Affine.constant(1 if const > 0 else -1 if const < 0 else 0)
    if kind != "ge" and nums[0] < 0:
        g = -g
    coeffs = {name: n // g for (name, _), n in zip(expr.items(), nums, strict=True)}
    if kind == "ge":
        return Affine(coeffs, math.floor(const / g))
    if (const / g).denominator != 1:
        # never zero: a constant stand-in with the same truth value
        return Affine.constant(1)
    return Affine(coeffs, int(const / g))


# -- nodes ------------------------------------------------------------------------------------

_TABLE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_SIMPLIFY = [True]
_WRITTEN = [False]


@contextlib.contextmanager
def raw_construction() -> Iterator[None]:
    """Build nodes without the constructors' local simplifications (for size comparisons)."""
    _SIMPLIFY.append(False)
    try:
        yield
    finally:
        _SIMPLIFY.pop()


@contextlib.contextmanager
def written_construction() -> Iterator[None]:
    """Build nodes with only the simplifications that keep every evaluated access where it is.

    The parser builds a definition *as written* this way: ``0 * u[s, t]``, ``x[i] - x[i]`` and
    ``x[i]**0`` keep their accesses, and ``where(c, 1, 0) * x[i]`` does not move ``x[i]`` under
    the condition, so that ranges are inferred and bounds checked on what the text reads.
    Constant folding and ``x * 1``, ``x + 0``, ``--x`` still apply (they drop no access).
    """
    _WRITTEN.append(True)
    try:
        yield
    finally:
        _WRITTEN.pop()


def _dropping() -> bool:
    """Whether rules that drop or move an evaluated subexpression may apply."""
    return _SIMPLIFY[-1] and not _WRITTEN[-1]


class Node:
    """Base class of the hash-consed scalar expression nodes (see the module docstring)."""

    __slots__ = ("__weakref__", "_free", "_key")
    _fields: tuple[str, ...] = ()

    def __new__(cls, *fields: object):
        key = (cls, *fields)
        node = _TABLE.get(key)
        if node is None:
            node = object.__new__(cls)
            for name, value in zip(cls._fields, fields, strict=True):
                object.__setattr__(node, name, value)
            object.__setattr__(node, "_key", key)
            object.__setattr__(node, "_free", None)
            _TABLE[key] = node
        return node

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("index-notation nodes are immutable")

    def __reduce__(self):
        return (type(self), self._key[1:])

    def children(self) -> tuple[Node, ...]:
        return ()

    def __str__(self) -> str:
        from tadiff.index.printer import expr_text

        return expr_text(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


class Const(Node):
    __slots__ = ("value",)
    _fields = ("value",)


class Index(Node):
    __slots__ = ("expr",)
    _fields = ("expr",)


class Access(Node):
    __slots__ = ("indices", "name")
    _fields = ("name", "indices")


class Op(Node):
    __slots__ = ("args", "op")
    _fields = ("op", "args")

    def children(self) -> tuple[Node, ...]:
        return self.args


class Sum(Node):
    __slots__ = ("body", "lower", "upper", "var")
    _fields = ("var", "lower", "upper", "body")

    def children(self) -> tuple[Node, ...]:
        return (self.body,)


class Where(Node):
    __slots__ = ("conds", "other", "then")
    _fields = ("conds", "then", "other")

    def children(self) -> tuple[Node, ...]:
        return (self.then, self.other)


# -- constructors (with local simplification) ---------------------------------------------------


_NAN = float("nan")


def const(value: float) -> Const:
    """A float constant (``-0.0`` is stored as ``0.0`` and every NaN as one NaN object, so equal
    constants intern to one node)."""
    value = float(value) + 0.0
    return Const(_NAN if value != value else value)


ZERO = const(0.0)
ONE = const(1.0)


def _is(node: Node, value: float) -> bool:
    return isinstance(node, Const) and node.value == value


def index_value(expr: Affine) -> Node:
    """The number an index expression evaluates to (``i`` used as a value in the body)."""
    if expr.is_constant and _SIMPLIFY[-1]:
        return const(float(expr.const))
    return Index(expr)


def access(name: str, indices: tuple[Affine, ...]) -> Access:
    """Element ``name[indices]`` of an argument."""
    return Access(name, tuple(indices))


def _fold(op: str, *args: Node) -> Node | None:
    if not _SIMPLIFY[-1] or not all(isinstance(a, Const) for a in args):
        return None
    from tadiff.index.interpret import scalar_op

    try:
        value = scalar_op(op, *(a.value for a in args))
    except (ArithmeticError, ValueError):
        return None  # e.g. log(0): keep symbolic, evaluation reports it
    return const(value)


def add(a: Node, b: Node) -> Node:
    """``a + b``."""
    if _SIMPLIFY[-1]:
        if _is(a, 0.0):
            return b
        if _is(b, 0.0):
            return a
        if a is b:
            return mul(const(2.0), a)
        if isinstance(b, Op) and b.op == "neg":
            return sub(a, b.args[0])
    return _fold("add", a, b) or Op("add", (a, b))


def sub(a: Node, b: Node) -> Node:
    """``a - b``."""
    if _SIMPLIFY[-1]:
        if _is(b, 0.0):
            return a
        if _is(a, 0.0):
            return neg(b)
        if a is b and _dropping():
            return ZERO
        if isinstance(b, Op) and b.op == "neg":
            return add(a, b.args[0])
    return _fold("sub", a, b) or Op("sub", (a, b))


def neg(a: Node) -> Node:
    """``-a``."""
    if _SIMPLIFY[-1] and isinstance(a, Op) and a.op == "neg":
        return a.args[0]
    return _fold("neg", a) or Op("neg", (a,))


def mul(a: Node, b: Node) -> Node:
    """``a * b``."""
    if _SIMPLIFY[-1]:
        if (_is(a, 0.0) or _is(b, 0.0)) and _dropping():
            return ZERO  # index-notation values are finite by assumption: 0 * x = 0
        if _is(a, 1.0):
            return b
        if _is(b, 1.0):
            return a
        if _is(a, -1.0):
            return neg(b)
        if _is(b, -1.0):
            return neg(a)
        if isinstance(a, Op) and a.op == "neg":
            return neg(mul(a.args[0], b))
        if isinstance(b, Op) and b.op == "neg":
            return neg(mul(a, b.args[0]))
        if isinstance(b, Const) and not isinstance(a, Const):
            return _constant_first(b, a)  # constants first: 2*x*y, never x*y*2 or 2*(x*y)
        # x * (1 / y) reads better, and evaluates in one rounding, as x / y
        if isinstance(b, Op) and b.op == "div" and b.args[0] is ONE:
            return div(a, b.args[1])
        if isinstance(a, Op) and a.op == "div" and a.args[0] is ONE:
            return div(b, a.args[1])
        # a delta factor wraps the whole product: where(c, a) * b = where(c, a * b)
        if isinstance(a, Where) and a.other is ZERO and _dropping():
            return where(a.conds, mul(a.then, b))
        if isinstance(b, Where) and b.other is ZERO and _dropping():
            return where(b.conds, mul(a, b.then))
        if a is b:
            return power(a, const(2.0))
        if (
            isinstance(a, Const)
            and isinstance(b, Op)
            and b.op == "mul"
            and isinstance(b.args[0], Const)
        ):
            return mul(const(a.value * b.args[0].value), b.args[1])
    return _fold("mul", a, b) or Op("mul", (a, b))


def _constant_first(c: Const, a: Node) -> Node:
    """``a * c`` with the constant moved to the front of the product chain ``a``."""
    if isinstance(a, Op) and a.op == "mul" and not isinstance(a.args[0], Const):
        return mul(_constant_first(c, a.args[0]), a.args[1])
    return mul(c, a)


def div(a: Node, b: Node) -> Node:
    """``a / b``."""
    if _SIMPLIFY[-1]:
        if _is(b, 1.0):
            return a
        if _is(a, 0.0) and _dropping():
            return ZERO
        if isinstance(b, Const) and not isinstance(a, Const) and abs(math.frexp(b.value)[0]) == 0.5:
            return mul(const(1.0 / b.value), a)  # x / 4 = 0.25 * x exactly (powers of two only)
    return _fold("div", a, b) or Op("div", (a, b))


def power(a: Node, b: Node) -> Node:
    """``a ** b``."""
    if _SIMPLIFY[-1]:
        if _is(b, 1.0):
            return a
        if _is(b, 0.0) and _dropping():
            return ONE
    return _fold("pow", a, b) or Op("pow", (a, b))


def apply(fn: str, *args: Node) -> Node:
    """An elementary function by name: one of ``UNARY`` or ``BINARY``."""
    if fn in ("add", "sub", "mul", "div", "pow", "neg"):
        return {"add": add, "sub": sub, "mul": mul, "div": div, "pow": power, "neg": neg}[fn](*args)
    if _SIMPLIFY[-1] and fn in BINARY and args[0] is args[1]:
        return args[0]
    return _fold(fn, *args) or Op(fn, tuple(args))


CHAIN = 32
"""Chains of ``+``/``-`` (or ``*``/``/``) longer than this are grouped as a balanced tree."""


def associate(
    terms: list[tuple[bool, Node]], direct: Callable[[Node, Node], Node], inverse: Callable
) -> Node:
    """Combine ``t0 op1 t1 op2 t2 ...`` where each term is ``(inverted, node)``: ``a - b - c``
    is ``[(False, a), (True, b), (True, c)]`` with ``direct=add``, ``inverse=sub``.

    Up to :data:`CHAIN` terms the chain is grouped left to right, as written. A longer one is
    grouped as a balanced tree — halves combined pairwise, ``a - b - c + d`` as
    ``(a - b) - (c - d)`` — so its depth grows with the logarithm of its length and the
    recursive passes over the expression (shapes, derivation, printing) stay shallow. The
    printed text of such a tree has chains of at most ``log2(length) + 1`` terms at every
    level of parentheses, so it reads back as the same tree.

    Example:
        >>> x = [access(n, ()) for n in "abc"]
        >>> str(associate([(False, x[0]), (True, x[1]), (True, x[2])], add, sub))
        'a[] - b[] - c[]'
    """
    if len(terms) <= CHAIN:
        node = terms[0][1]
        for inverted, term in terms[1:]:
            node = (inverse if inverted else direct)(node, term)
        return node

    def group(items: list[tuple[bool, Node]]) -> tuple[bool, Node]:
        if len(items) == 1:
            return items[0]
        (sign, left), (flip, right) = (
            group(items[: len(items) // 2]),
            group(items[len(items) // 2 :]),
        )
        # -l - r = -(l + r) and -l + r = -(l - r): the group keeps its first term's sign
        return sign, (inverse if flip != sign else direct)(left, right)

    return group(terms)[1]  # the first term is never inverted


def add_all(nodes: list[Node]) -> Node:
    """The sum of ``nodes`` (0 for none), balanced when long (see :func:`associate`)."""
    return associate([(False, n) for n in nodes], add, sub) if nodes else ZERO


def sum_over(var: str, lower: tuple[Affine, ...], upper: tuple[Affine, ...], body: Node) -> Node:
    """``sum`` of ``body`` over integers ``max(ceil(lower)) <= var <= min(floor(upper))``.

    A sum of zero is zero; a sum whose body does not mention ``var`` stays a sum (its count of
    terms is what multiplies the body, and that count depends on the bounds).
    """
    if _SIMPLIFY[-1] and _is(body, 0.0):
        return ZERO
    return Sum(var, tuple(dict.fromkeys(lower)), tuple(dict.fromkeys(upper)), body)


def where(conds: tuple[Cond, ...] | list[Cond], then: Node, other: Node = ZERO) -> Node:
    """``then`` where every condition holds, else ``other``.

    Constant conditions are decided now, duplicates merged, nested ``where`` with the same
    ``other`` merged into one condition list.
    """
    if not _SIMPLIFY[-1]:
        return Where(tuple(conds), then, other)
    if _WRITTEN[-1]:  # as written: even a branch never taken keeps its accesses (arguments)
        conds = tuple(dict.fromkeys(conds))
        if isinstance(then, Where) and then.other is other:
            return Where((*conds, *(c for c in then.conds if c not in conds)), then.then, other)
        return Where(conds, then, other)
    kept: list[Cond] = []
    for cond in conds:
        truth = cond.constant_truth()
        if truth is False:
            return other
        if truth is None and cond not in kept:
            kept.append(cond)
    if not kept or then is other:
        return then
    if isinstance(then, Where) and then.other is other:
        return where((*kept, *then.conds), then.then, other)
    return Where(tuple(kept), then, other)


# -- traversal --------------------------------------------------------------------------------


def walk(root: Node) -> list[Node]:
    """Every distinct node reachable from ``root`` (through sum bodies too), children first."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(node.children()))
    return order


def node_count(root: Node) -> int:
    """Number of distinct nodes in the DAG (the stored size of the expression)."""
    return len(walk(root))


def depth(root: Node) -> int:
    """Nesting depth of the expression: 1 for a leaf, else 1 + the deepest child (through sum
    bodies), computed without recursion."""
    levels: dict[int, int] = {}
    for node in walk(root):
        levels[id(node)] = 1 + max((levels[id(c)] for c in node.children()), default=0)
    return levels[id(root)]


def index_exprs(node: Node) -> Iterator[Affine]:
    """The index expressions a node holds itself (not those of its children)."""
    if isinstance(node, Index):
        yield node.expr
    elif isinstance(node, Access):
        yield from node.indices
    elif isinstance(node, Sum):
        yield from node.lower
        yield from node.upper
    elif isinstance(node, Where):
        yield from (c.expr for c in node.conds)


def free_indices(node: Node) -> frozenset[str]:
    """Index variables (not size parameters) that occur free in ``node``."""
    if node._free is None:
        names: set[str] = set()
        for a in index_exprs(node):
            names.update(v for v in a.variables if not is_param(v))
        if isinstance(node, Sum):
            names.update(free_indices(node.body) - {node.var})
        else:
            for child in node.children():
                names.update(free_indices(child))
        object.__setattr__(node, "_free", frozenset(names))
    return node._free


def fresh_name(base: str, taken: set[str] | frozenset[str]) -> str:
    """``base`` if not taken, else ``base1``, ``base2``, ... (the first that is free)."""
    if base not in taken:
        return base
    n = 1
    while f"{base}{n}" in taken:
        n += 1
    return f"{base}{n}"


def index_names(root: Node) -> set[str]:
    """Every index variable in the expression: free, bound by a sum, or used inside one."""
    names: set[str] = set()
    for node in walk(root):
        if isinstance(node, Sum):
            names.add(node.var)
        for a in index_exprs(node):
            names.update(v for v in a.variables if not is_param(v))
    return names


def unshadow(root: Node, bound: Iterable[str], avoid: Iterable[str] = ()) -> Node:
    """``root`` with every sum index that repeats a name already bound around it (an output
    index in ``bound``, or an enclosing sum's index) renamed to a fresh one.

    A derivative can nest the forward's ``sum[k]`` where ``k`` is its own output index; the
    meaning is the same, but the text form, the bounds checker and the loop nests want one
    name per binding. Fresh names avoid every index of ``root`` and the names in ``avoid``
    (tensor names).

    Example:
        >>> k = Affine.variable("k")
        >>> inner = sum_over("k", (Affine.constant(0),), (Affine.constant(2),), access("x", (k,)))
        >>> str(unshadow(mul(access("w", (k,)), inner), {"k"}))
        'w[k] * sum[k1=0:3](x[k1])'
    """
    taken = index_names(root) | set(avoid) | set(bound)
    cache: dict[tuple[int, frozenset[str]], Node] = {}

    def go(node: Node, scope: frozenset[str]) -> Node:
        key = (id(node), scope)
        hit = cache.get(key)
        if hit is not None:
            return hit
        out = node
        if isinstance(node, Sum):
            var, body = node.var, node.body
            if var in scope:
                fresh = fresh_name(var, taken)
                taken.add(fresh)
                body = substitute(body, {var: Affine.variable(fresh)})
                var = fresh
            inner = go(body, scope | {var})
            if var != node.var or inner is not node.body:
                out = Sum(var, node.lower, node.upper, inner)
        elif isinstance(node, Op):
            args = tuple(go(a, scope) for a in node.args)
            if any(a is not b for a, b in zip(args, node.args, strict=True)):
                out = Op(node.op, args)
        elif isinstance(node, Where):
            then, other = go(node.then, scope), go(node.other, scope)
            if then is not node.then or other is not node.other:
                out = Where(node.conds, then, other)
        cache[key] = out
        return out

    # renaming only: the tree keeps its structure (no simplification, even of a written one)
    with raw_construction():
        return go(root, frozenset(bound))


def substitute_params(node: Node, mapping: Mapping[str, Affine]) -> Node:
    """``node`` with size parameters replaced (``x.shape[0]`` -> ``dy.shape[0]``): in indices,
    sum bounds and conditions. Parameters are never bound, so nothing can be captured."""
    if not mapping:
        return node

    def swap(a: Affine) -> Affine:
        hit = {k: v for k, v in mapping.items() if k in a.variables}
        return a.substitute(hit) if hit else a

    cache: dict[int, Node] = {}

    def go(n: Node) -> Node:
        out = cache.get(id(n))
        if out is not None:
            return out
        if isinstance(n, Index):
            out = index_value(swap(n.expr))
        elif isinstance(n, Access):
            out = access(n.name, tuple(swap(a) for a in n.indices))
        elif isinstance(n, Op):
            out = apply(n.op, *(go(a) for a in n.args))
        elif isinstance(n, Where):
            out = where([c.substitute(mapping) for c in n.conds], go(n.then), go(n.other))
        elif isinstance(n, Sum):
            lower, upper = tuple(map(swap, n.lower)), tuple(map(swap, n.upper))
            out = sum_over(n.var, lower, upper, go(n.body))
        else:
            out = n
        cache[id(n)] = out
        return out

    return go(node)


def rebuild(node: Node, replace) -> Node:
    """``node`` rebuilt bottom-up through the simplifying constructors, with every subexpression
    for which ``replace(n)`` returns a node replaced by it (its children are not visited then).
    Shared subexpressions are rebuilt once.

    Example:
        >>> x, y = access("x", ()), access("y", ())
        >>> str(rebuild(add(x, mul(x, y)), lambda n: const(2.0) if n is x else None))
        '2 + 2 * y[]'
    """
    memo: dict[int, Node] = {}

    def go(n: Node) -> Node:
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        out = replace(n)
        if out is None:
            if isinstance(n, Op):
                out = apply(n.op, *(go(a) for a in n.args))
            elif isinstance(n, Where):
                out = where(n.conds, go(n.then), go(n.other))
            elif isinstance(n, Sum):
                out = sum_over(n.var, n.lower, n.upper, go(n.body))
            else:
                out = n
        memo[id(n)] = out
        return out

    return go(node)


def substitute(node: Node, mapping: Mapping[str, Affine]) -> Node:
    """Replace free index variables by affine expressions, renaming bound sum variables that
    would capture a variable of a replacement.

    Example:
        >>> i, j = Affine.variable("i"), Affine.variable("j")
        >>> str(substitute(access("x", (i,)), {"i": j + 1}))
        'x[j + 1]'
    """
    mapping = {
        k: v for k, v in mapping.items() if not (isinstance(v, Affine) and v == Affine.variable(k))
    }
    if not mapping:
        return node
    cache: dict[tuple[int, tuple], Node] = {}
    return _subst(node, dict(mapping), cache)


def _subst(node: Node, mapping: dict[str, Affine], cache: dict) -> Node:
    relevant = {k: v for k, v in mapping.items() if k in free_indices(node)}
    if not relevant:
        return node
    key = (id(node), tuple(sorted((k, v) for k, v in relevant.items())))
    hit = cache.get(key)
    if hit is not None and hit[0] is node:  # the node is kept in the entry: ids stay unique
        return hit[1]
    if isinstance(node, Index):
        out = index_value(node.expr.substitute(relevant))
    elif isinstance(node, Access):
        out = access(node.name, tuple(a.substitute(relevant) for a in node.indices))
    elif isinstance(node, Op):
        out = apply(node.op, *(_subst(c, relevant, cache) for c in node.args))
    elif isinstance(node, Where):
        out = where(
            [c.substitute(relevant) for c in node.conds],
            _subst(node.then, relevant, cache),
            _subst(node.other, relevant, cache),
        )
    elif isinstance(node, Sum):
        inner = {k: v for k, v in relevant.items() if k != node.var}
        var, body = node.var, node.body
        captured = set().union(*(v.variables for v in inner.values()))
        if var in captured:
            taken = captured | set(inner) | free_indices(node.body)
            var = fresh_name(node.var, taken)
            body = _subst(body, {node.var: Affine.variable(var)}, cache)
        out = sum_over(
            var,
            tuple(a.substitute(inner) for a in node.lower),
            tuple(a.substitute(inner) for a in node.upper),
            _subst(body, inner, cache),
        )
    else:  # pragma: no cover - Const has no free indices
        out = node
    cache[key] = (node, out)
    return out
