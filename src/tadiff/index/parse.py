"""Parse the index-notation DSL into the IR, with the column of every error.

Grammar (whitespace is free; ``#`` has no meaning)::

    definition := NAME ( '[' [outvar (',' outvar)*] ']' )? '=' expr
    outvar     := NAME (':' size)?                      # optional explicit size
    size       := INT | index over sizes only            # i:4, p:x.shape[0]
    expr       := term (('+' | '-') term)*
    term       := unary (('*' | '/') unary)*
    unary      := '-' unary | power
    power      := atom ('**' unary)?
    atom       := NUMBER | 'inf' | 'nan' | '(' expr ')'
                | NAME '[' [index (',' index)*] ']'       # argument element
                | NAME                                   # an index variable used as a number
                | 'sum' '[' sumvar (',' sumvar)* ']' '(' expr ')'
                | 'where' '(' cond ('and' cond)* ',' expr ',' expr ')'
                | FUNCTION '(' expr [',' expr] ')'      # exp log ... maximum minimum
    sumvar     := NAME ('=' lower ':' upper)?            # half-open range lower <= var < upper
    lower      := 'max' '(' litem (',' litem)* ')' | litem
    litem      := 'ceil' '(' index ')' | index
    upper      := 'min' '(' uitem (',' uitem)* ')' | uitem
    uitem      := 'floor' '(' index ')' '+' '1' | index
    cond       := index ('=='|'!='|'<'|'<='|'>'|'>=') index | index '%' INT '==' '0'
    index      := affine in index variables and sizes ``x.shape[d]`` with integer coefficients
                  (``/ INT`` allowed: derived functions print fractional indices under a
                  divisibility condition)

An argument may appear through its sizes only (``x.shape[1]``, as in a derivative's output
size ``dx[p:x.shape[0]]``): it is then an argument with at least that many dimensions.

The body is built *as written* (:func:`~tadiff.index.expr.written_construction`): no access is
dropped or moved, so ranges are inferred and bounds checked on everything the text reads. Sum
ranges left open are inferred here, from the accesses inside the sum
(:func:`~tadiff.index.shapes.sum_range`); a sum whose range no access decides is an error at
its index.

Limits (each a ParseError at the place it is exceeded): at most :data:`MAX_SOURCE` characters,
:data:`MAX_NESTING` levels of nesting (parentheses, unary minus, powers, calls, sums, ``where``),
integers of at most :data:`MAX_INT_DIGITS` digits. Chains of ``+``/``-`` and ``*``/``/`` are
loops, not recursion, and are grouped as balanced trees when long
(:func:`~tadiff.index.expr.associate`), so no limit applies to their length.

Example:
    >>> d = parse("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    >>> d.out_vars, dict(d.arg_ranks)
    (('b', 'o', 't'), {'x': 3, 'w': 3})
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from tadiff.errors import ParseError
from tadiff.index import expr as ir
from tadiff.index.expr import Affine, Cond, Node, size_param

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "MAX_NESTING", "MAX_SOURCE", "Definition", "parse"]

MAX_SOURCE = 4_000_000
"""Longest definition text accepted, in characters."""

MAX_NESTING = 100
"""Deepest nesting of parentheses, unary minus, powers, calls, sums and ``where`` in the text."""

MAX_DEPTH = 256
"""Deepest expression tree (operations, calls, sums, conditions) of a definition or of a
derivative: every pass over an expression (shapes, derivation, printing, the interpreter, the
compiled backends) recurses at most this deep."""

MAX_INT_DIGITS = 40
"""Most digits of an integer in an index, a size, a modulus or a divisor."""


@dataclass(frozen=True)
class Definition:
    """A parsed definition ``out_name[out_vars] = body``.

    Attributes:
        source: the text.
        out_name: name of the defined tensor.
        out_vars: output index variables, one per output dimension.
        out_sizes: explicit output sizes as affine expressions in sizes (``None`` where the
            size is inferred from shapes).
        body: the scalar expression as written (IR); sums written without bounds keep empty
            bound tuples.
        arg_ranks: argument name -> number of indices, in order of first appearance (for an
            argument used through its sizes only: the least number of dimensions it needs).
        sum_ranges: each sum written without bounds -> its inferred inclusive range.
        equal_sizes: ``(size, size, index)``: an index used plainly in two dimensions of
            these sizes (einsum semantics: they must be equal).
        shape_only: arguments that appear through their sizes only.
    """

    source: str
    out_name: str
    out_vars: tuple[str, ...]
    out_sizes: tuple[Affine | None, ...]
    body: Node
    arg_ranks: dict[str, int] = field(default_factory=dict)
    sum_ranges: dict[Node, tuple[tuple[Affine, ...], tuple[Affine, ...]]] = field(
        default_factory=dict
    )
    equal_sizes: tuple[tuple[str, str, str], ...] = ()
    shape_only: frozenset[str] = frozenset()


_TOKEN = re.compile(
    r"(?P<number>[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]*\.[0-9]+(?:[eE][-+]?[0-9]+)?"
    r"|[0-9]+(?:[eE][-+]?[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<op>\*\*|==|!=|<=|>=|[-+*/()\[\],=:<>%.])",
    re.ASCII,
)
_SPACE = re.compile(r"[ \t\r\n\f\v]*")

_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")
_MAX_DIMS = 64  # NumPy's limit on the number of dimensions
_CONSTANTS = {"inf": float("inf"), "nan": float("nan")}
_RESERVED = {"sum", "where", "and", "max", "min", "ceil", "floor", "shape", *_CONSTANTS}


@dataclass
class _Token:
    kind: str  # "number", "name", "op", "end"
    text: str
    column: int


def _tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = _SPACE.match(source).end()
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:
            raise ParseError(f"unexpected character {source[pos]!r}", source, pos)
        kind = match.lastgroup
        tokens.append(_Token(kind, match.group(kind), pos))
        pos = _SPACE.match(source, match.end()).end()
    tokens.append(_Token("end", "", len(source)))
    return tokens


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.tokens = _tokenize(source)
        self.pos = 0
        self.scope: list[str] = []  # bound index variables, innermost last
        self.out_vars: tuple[str, ...] = ()
        self.out_name = ""
        self.arg_ranks: dict[str, int] = {}
        self.arg_columns: dict[str, int] = {}
        self.params: list[tuple[str, int, int]] = []  # (arg, dim, column) of x.shape[d] uses
        self.nesting = 0
        self.depths: dict[int, int] = {}  # id(node) -> depth of its tree (see shallow)
        self.keep: list[Node] = []
        self.sum_ranges: dict[Node, tuple[tuple[Affine, ...], tuple[Affine, ...]]] = {}
        self.equal_sizes: list[tuple[str, str, str]] = []

    # -- token helpers ------------------------------------------------------------------------
    @property
    def tok(self) -> _Token:
        return self.tokens[self.pos]

    def error(self, message: str, token: _Token | None = None) -> ParseError:
        token = token or self.tok
        return ParseError(message, self.source, token.column)

    def _describe(self, token: _Token) -> str:
        return "end of input" if token.kind == "end" else repr(token.text)

    def accept(self, text: str) -> _Token | None:
        if self.tok.text == text and self.tok.kind in ("op", "name"):
            token = self.tok
            self.pos += 1
            return token
        return None

    def expect(self, text: str, what: str = "") -> _Token:
        token = self.accept(text)
        if token is None:
            raise self.error(f"expected {what or repr(text)}, found {self._describe(self.tok)}")
        return token

    def name(self, what: str) -> _Token:
        token = self.tok
        if token.kind != "name":
            raise self.error(f"expected {what}, found {self._describe(token)}")
        self.pos += 1
        return token

    def integer(self, what: str) -> int:
        token = self.tok
        if token.kind != "number" or not token.text.isdigit():
            raise self.error(
                f"expected {what} (a non-negative integer), found {self._describe(token)}"
            )
        self.pos += 1
        return self.int_value(token)

    def int_value(self, token: _Token) -> int:
        if len(token.text) > MAX_INT_DIGITS:
            raise self.error(
                f"an integer in an index or size has at most {MAX_INT_DIGITS} digits, "
                f"this one has {len(token.text)}",
                token,
            )
        return int(token.text)

    def nested(self, token: _Token | None = None) -> None:
        """Enter one level of nesting (left by ``self.nesting -= 1``)."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(
                f"the expression nests more than {MAX_NESTING} levels deep (parentheses, "
                "unary minus, powers, calls, sums and where)",
                token,
            )

    # -- definition ---------------------------------------------------------------------------
    def definition(self) -> Definition:
        head = self.name("the name of the defined tensor")
        if head.text in _RESERVED or head.text in ir.UNARY + ir.BINARY:
            raise self.error(f"{head.text!r} is reserved and cannot name a tensor", head)
        self.out_name = head.text
        out_vars: list[str] = []
        sizes: list[int | None] = []
        if self.accept("[") and not self.accept("]"):
            while True:
                var = self.name("an output index name")
                if var.text in out_vars:
                    raise self.error(f"output index {var.text!r} appears twice", var)
                if var.text in _RESERVED:
                    raise self.error(f"{var.text!r} is reserved and cannot be an index", var)
                out_vars.append(var.text)
                sizes.append(self.out_size() if self.accept(":") else None)
                if self.accept("]"):
                    break
                self.expect(",", "',' or ']' in the output indices")
        self.expect("=", "'=' after the output")
        self.out_vars = tuple(out_vars)
        self.scope = list(out_vars)
        with ir.written_construction():
            body = self.expr()
        if self.tok.kind != "end":
            raise self.error(
                f"expected an operator or end of input, found {self._describe(self.tok)}"
            )
        shape_only: dict[str, int] = {}
        for arg, dim, column in self.params:
            if arg not in self.arg_ranks or arg in shape_only:
                # an argument used through its sizes only: it has at least dim + 1 dimensions
                shape_only[arg] = max(shape_only.get(arg, 0), dim + 1)
                self.arg_columns.setdefault(arg, column)
            elif dim >= self.arg_ranks[arg]:
                raise ParseError(
                    f"{arg}.shape[{dim}]: {arg!r} has only {self.arg_ranks[arg]} dimension(s)",
                    self.source,
                    column,
                )
        ranks = {**self.arg_ranks, **shape_only}
        order = sorted(ranks, key=lambda a: self.arg_columns[a])
        return Definition(
            self.source,
            self.out_name,
            self.out_vars,
            tuple(sizes),
            body,
            {a: ranks[a] for a in order},
            self.sum_ranges,
            tuple(self.equal_sizes),
            frozenset(shape_only),
        )

    def out_size(self) -> Affine:
        """An explicit output size: an integer, or an affine expression in sizes."""
        start = self.tok
        scope, self.scope = self.scope, []  # no index may appear in a size
        try:
            size = self.affine()
        finally:
            self.scope = scope
        if not size.is_integral:
            raise self.error("an output size must be an integer", start)
        if size.is_constant and size.const < 1:
            raise self.error("an output size must be at least 1", start)
        return size

    # -- scalar expressions -------------------------------------------------------------------
    def expr(self) -> Node:
        terms = [(False, self.term())]
        while True:
            if self.accept("+"):
                terms.append((False, self.term()))
            elif self.accept("-"):
                terms.append((True, self.term()))
            else:
                return self.shallow(ir.associate(terms, ir.add, ir.sub))

    def shallow(self, node: Node) -> Node:
        """``node``, after checking that the tree is at most :data:`MAX_DEPTH` deep."""
        levels = self.depths
        stack = [node]
        while stack:  # depths of the nodes not seen yet, children first, without recursion
            top = stack[-1]
            missing = [c for c in top.children() if id(c) not in levels]
            if missing:
                stack += missing
                continue
            stack.pop()
            levels[id(top)] = 1 + max((levels[id(c)] for c in top.children()), default=0)
            self.keep.append(top)  # ids stay valid while they key the memo
        if levels[id(node)] > MAX_DEPTH:
            raise self.error(
                f"the expression is {levels[id(node)]} levels deep, more than {MAX_DEPTH} "
                "(operations, calls, sums and conditions): split the definition"
            )
        return node

    def term(self) -> Node:
        factors = [(False, self.unary())]
        while True:
            if self.accept("*"):
                factors.append((False, self.unary()))
            elif self.accept("/"):
                factors.append((True, self.unary()))
            else:
                return ir.associate(factors, ir.mul, ir.div)

    def unary(self) -> Node:
        self.nested()
        try:
            if self.accept("-"):
                return ir.neg(self.unary())
            return self.power()
        finally:
            self.nesting -= 1

    def power(self) -> Node:
        base = self.atom()
        if self.accept("**"):
            return ir.power(base, self.unary())
        return base

    def atom(self) -> Node:
        token = self.tok
        if token.kind == "number":
            self.pos += 1
            return ir.const(float(token.text))
        if token.kind == "name" and token.text in _CONSTANTS:
            self.pos += 1
            return ir.const(_CONSTANTS[token.text])
        if self.accept("("):
            node = self.expr()
            self.expect(")", "')' to close '('")
            return node
        if token.kind != "name":
            raise self.error(f"expected a number, a name or '(', found {self._describe(token)}")
        self.pos += 1
        if token.text == "sum":
            return self.sum_expr(token)
        if token.text == "where":
            return self.where_expr()
        if token.text in ir.UNARY or token.text in ir.BINARY:
            return self.call(token)
        if self.tok.text == "(" and self.tok.kind == "op":
            known = ", ".join((*ir.UNARY, *ir.BINARY))
            raise self.error(f"unknown function {token.text!r}; expected one of {known}", token)
        if self.tok.text == "[" and self.tok.kind == "op":
            return self.access(token)
        if token.text in self.scope:
            return ir.index_value(Affine.variable(token.text))
        if token.text in _RESERVED:
            raise self.error(f"{token.text!r} cannot be used here", token)
        raise self.error(
            f"unknown index {token.text!r}: not an output or sum index "
            f"(a scalar argument is written {token.text}[])",
            token,
        )

    def call(self, fn: _Token) -> Node:
        self.expect("(", f"'(' after {fn.text}")
        args = [self.expr()]
        while self.accept(","):
            args.append(self.expr())
        self.expect(")", f"')' to close {fn.text}(")
        arity = 1 if fn.text in ir.UNARY else 2
        if len(args) != arity:
            raise self.error(f"{fn.text} takes {arity} argument(s), got {len(args)}", fn)
        return ir.apply(fn.text, *args)

    def access(self, name: _Token) -> Node:
        if name.text == self.out_name:
            raise self.error(f"{name.text!r} is the defined tensor and cannot be an argument", name)
        if name.text in self.scope or name.text in self.out_vars:
            raise self.error(f"{name.text!r} is an index and cannot also be a tensor", name)
        if name.text in _RESERVED:
            raise self.error(f"{name.text!r} is reserved and cannot name a tensor", name)
        self.expect("[")
        indices: list[Affine] = []
        if not self.accept("]"):
            while True:
                indices.append(self.affine())
                if self.accept("]"):
                    break
                self.expect(",", f"',' or ']' in the indices of {name.text}")
        rank = self.arg_ranks.setdefault(name.text, len(indices))
        self.arg_columns.setdefault(name.text, name.column)
        if rank != len(indices):
            raise self.error(
                f"{name.text} is used with {len(indices)} indices here but with {rank} before",
                name,
            )
        return ir.access(name.text, tuple(indices))

    def sum_expr(self, keyword: _Token) -> Node:
        self.expect("[", "'[' after sum")
        specs: list[
            tuple[str, tuple[Affine, ...], tuple[Affine, ...]] | tuple[str, None, None]
        ] = []
        added: list[str] = []
        tokens: list[_Token] = []
        while True:
            var = self.name("a sum index name")
            tokens.append(var)
            if var.text in self.scope:
                meaning = (
                    "an output index" if var.text in self.out_vars else "an enclosing sum index"
                )
                raise self.error(f"sum index {var.text!r} is already {meaning}", var)
            if var.text in self.arg_ranks or var.text == self.out_name or var.text in _RESERVED:
                raise self.error(f"{var.text!r} cannot be a sum index: it names a tensor", var)
            if self.accept("="):
                lower = self.bounds("max", "ceil", exclusive=False)
                self.expect(":", "':' between the lower and upper bound")
                upper = self.bounds("min", "floor", exclusive=True)
                specs.append((var.text, lower, upper))
            else:
                specs.append((var.text, None, None))
            self.scope.append(var.text)
            added.append(var.text)
            if self.accept("]"):
                break
            self.expect(",", "',' or ']' in the sum indices")
        self.expect("(", "'(' after sum[...]")
        body = self.expr()
        self.expect(")", "')' to close sum(")
        del self.scope[-len(added) :]
        for (var, lower, upper), token in zip(reversed(specs), reversed(tokens), strict=True):
            if lower is None:
                # a range left open is inferred from the accesses in the sum; () marks it
                inferred, equal = self.infer_sum(var, body, token)
                body = ir.Sum(var, (), (), body)
                self.sum_ranges[body] = inferred
                self.equal_sizes += equal
            else:
                body = ir.sum_over(var, lower, upper, body)
        return body

    def infer_sum(self, var: str, body: Node, token: _Token):
        from tadiff.index.shapes import sum_range

        found = sum_range(var, body, self.sum_ranges)
        if found is None:
            raise self.error(
                f"cannot infer the range of sum index {var!r}: no access inside the sum reads "
                f"a dimension with {var!r} alone in its index; give the range, e.g. "
                f"sum[{var}=0:5](...)",
                token,
            )
        return found

    def bounds(self, combine: str, rounding: str, exclusive: bool) -> tuple[Affine, ...]:
        if self.accept(combine):
            self.expect("(", f"'(' after {combine}")
            items = [self.bound_item(rounding, exclusive)]
            while self.accept(","):
                items.append(self.bound_item(rounding, exclusive))
            self.expect(")", f"')' to close {combine}(")
            return tuple(items)
        return (self.bound_item(rounding, exclusive),)

    def bound_item(self, rounding: str, exclusive: bool) -> Affine:
        start = self.tok
        if self.accept(rounding):
            self.expect("(", f"'(' after {rounding}")
            value = self.affine()
            self.expect(")", f"')' to close {rounding}(")
            if exclusive:
                self.expect("+", f"'+ 1' after {rounding}(...) in an exclusive upper bound")
                one = self.tok
                if self.integer("1") != 1:
                    raise self.error("expected '+ 1' after floor(...)", one)
            return value
        value = self.affine()
        if not value.is_integral:
            raise self.error(f"a bound with fractions must be written {rounding}(...)", start)
        return value - 1 if exclusive else value

    def where_expr(self) -> Node:
        self.expect("(", "'(' after where")
        conds = [self.condition()]
        while self.accept("and"):
            conds.append(self.condition())
        self.expect(",", "',' after the condition of where")
        then = self.expr()
        self.expect(",", "',' between the two values of where")
        other = self.expr()
        self.expect(")", "')' to close where(")
        return ir.where(conds, then, other)

    def condition(self) -> Cond:
        left = self.affine()
        if self.accept("%"):
            modulus = self.integer("a modulus")
            if modulus < 1:
                raise self.error("the modulus must be at least 1")
            self.expect("==", "'==' after the modulus")
            zero = self.tok
            if self.integer("0") != 0:
                raise self.error("a divisibility condition is written e % m == 0", zero)
            return Cond.mod(left, modulus) if modulus > 1 else Cond.eq(Affine.constant(0))
        op = self.tok
        if op.text not in _COMPARISONS:
            raise self.error(f"expected a comparison ({' '.join(_COMPARISONS)}) or '%'")
        self.pos += 1
        right = self.affine()
        diff = left - right
        return {
            "==": lambda: Cond.eq(diff),
            "!=": lambda: Cond.ne(diff),
            ">=": lambda: Cond.ge(diff),
            "<=": lambda: Cond.ge(-diff),
            ">": lambda: Cond.ge(diff - 1),
            "<": lambda: Cond.ge(-diff - 1),
        }[op.text]()

    # -- affine index expressions -------------------------------------------------------------
    def affine(self) -> Affine:
        value = self.affine_term()
        while True:
            if self.accept("+"):
                value = value + self.affine_term()
            elif self.accept("-"):
                value = value - self.affine_term()
            else:
                return value

    def affine_term(self) -> Affine:
        value = self.affine_unary()
        while True:
            op = self.tok
            if self.accept("*"):
                right = self.affine_unary()
                if not (value.is_constant or right.is_constant):
                    raise self.error(
                        f"index expression ({value}) * ({right}) is not affine: "
                        "indices must be integer combinations of index variables",
                        op,
                    )
                value = value * right
            elif self.accept("/"):
                den = self.tok
                divisor = self.integer("an integer divisor")
                if divisor == 0:
                    raise self.error("division by zero in an index", den)
                value = value / Fraction(divisor)
            else:
                return value

    def affine_unary(self) -> Affine:
        self.nested()
        try:
            return self.affine_atom()
        finally:
            self.nesting -= 1

    def affine_atom(self) -> Affine:
        if self.accept("-"):
            return -self.affine_unary()
        token = self.tok
        if token.kind == "number":
            if not token.text.isdigit():
                raise self.error(f"index constants must be integers, found {token.text}")
            self.pos += 1
            return Affine.constant(self.int_value(token))
        if self.accept("("):
            value = self.affine()
            self.expect(")", "')' to close '('")
            return value
        if token.kind != "name":
            raise self.error(f"expected an index expression, found {self._describe(token)}")
        self.pos += 1
        if self.accept("."):
            if token.text == self.out_name:
                raise self.error(
                    f"{token.text!r} is the defined tensor: its shape is not known here", token
                )
            if token.text in _RESERVED or token.text in self.scope or token.text in self.out_vars:
                raise self.error(f"{token.text!r} is not a tensor and has no shape", token)
            self.expect("shape", "'shape' after '.'")
            self.expect("[", "'[' after shape")
            dim_token = self.tok
            dim = self.integer("a dimension")
            if dim >= _MAX_DIMS:
                raise self.error(f"a dimension must be below {_MAX_DIMS}, got {dim}", dim_token)
            self.expect("]", "']' after the dimension")
            self.params.append((token.text, dim, token.column))
            return Affine.variable(size_param(token.text, dim))
        if token.text in self.scope:
            return Affine.variable(token.text)
        if self.tok.text in ("(", "["):
            raise self.error(
                f"{token.text}{self.tok.text}...) cannot appear in an index: indices are affine",
                token,
            )
        raise self.error(f"unknown index {token.text!r}: not an output or sum index", token)


def parse(source: str) -> Definition:
    """Parse a definition such as ``"y[i,j] = sum[k](x[i,k] * w[k,j])"``.

    Sum ranges written without bounds (``sum[k]``) are returned as ``Sum`` nodes with empty bound
    tuples; :func:`tadiff.index.function.define` infers them from the argument shapes.

    Raises:
        ParseError: with the column of the offending token and what was expected there.
    """
    if not isinstance(source, str):
        raise ParseError(f"a definition must be a str, got {type(source).__name__}")
    if len(source) > MAX_SOURCE:
        error = ParseError(
            f"a definition has at most {MAX_SOURCE} characters, this one has {len(source)} "
            f"(column {MAX_SOURCE + 1})"
        )
        error.source, error.column = source, MAX_SOURCE
        raise error
    return _Parser(source).definition()
