"""Parse the index-notation DSL into the IR, with the column of every error.

Grammar (whitespace is free; ``#`` has no meaning)::

    definition := NAME ( '[' [outvar (',' outvar)*] ']' )? '=' expr
    outvar     := NAME (':' INT)?                       # optional explicit size
    expr       := term (('+' | '-') term)*
    term       := unary (('*' | '/') unary)*
    unary      := '-' unary | power
    power      := atom ('**' unary)?
    atom       := NUMBER | '(' expr ')' | NAME '[' [index (',' index)*] ']'   # argument element
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

__all__ = ["Definition", "parse"]


@dataclass(frozen=True)
class Definition:
    """A parsed definition ``out_name[out_vars] = body``.

    Attributes:
        source: the text.
        out_name: name of the defined tensor.
        out_vars: output index variables, one per output dimension.
        out_sizes: explicit output sizes (``None`` where the size is inferred from shapes).
        body: the scalar expression (IR).
        arg_ranks: argument name -> number of indices, in order of first appearance.
    """

    source: str
    out_name: str
    out_vars: tuple[str, ...]
    out_sizes: tuple[int | None, ...]
    body: Node
    arg_ranks: dict[str, int] = field(default_factory=dict)


_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+\.\d*(?:[eE][-+]?\d+)?|\d*\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<op>\*\*|==|!=|<=|>=|[-+*/()\[\],=:<>%.]))"
)

_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")
_RESERVED = {"sum", "where", "and", "max", "min", "ceil", "floor", "shape"}


@dataclass
class _Token:
    kind: str  # "number", "name", "op", "end"
    text: str
    column: int


def _tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(source):
        if source[pos:].strip() == "":
            break
        match = _TOKEN.match(source, pos)
        if match is None or match.end() == pos:
            column = pos + len(source[pos:]) - len(source[pos:].lstrip())
            raise ParseError(f"unexpected character {source[column]!r}", source, column)
        kind = match.lastgroup
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        pos = match.end()
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
        return int(token.text)

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
                size_token = self.tok
                size = (
                    self.integer("the size of the output dimension") if self.accept(":") else None
                )
                if size == 0:
                    raise self.error("an output size must be at least 1", size_token)
                sizes.append(size)
                if self.accept("]"):
                    break
                self.expect(",", "',' or ']' in the output indices")
        self.expect("=", "'=' after the output")
        self.out_vars = tuple(out_vars)
        self.scope = list(out_vars)
        body = self.expr()
        if self.tok.kind != "end":
            raise self.error(
                f"expected an operator or end of input, found {self._describe(self.tok)}"
            )
        for arg, dim, column in self.params:
            if arg not in self.arg_ranks:
                raise ParseError(
                    f"{arg}.shape[{dim}]: {arg!r} is not an argument", self.source, column
                )
            if dim >= self.arg_ranks[arg]:
                raise ParseError(
                    f"{arg}.shape[{dim}]: {arg!r} has only {self.arg_ranks[arg]} dimension(s)",
                    self.source,
                    column,
                )
        return Definition(
            self.source, self.out_name, self.out_vars, tuple(sizes), body, self.arg_ranks
        )

    # -- scalar expressions -------------------------------------------------------------------
    def expr(self) -> Node:
        node = self.term()
        while True:
            if self.accept("+"):
                node = ir.add(node, self.term())
            elif self.accept("-"):
                node = ir.sub(node, self.term())
            else:
                return node

    def term(self) -> Node:
        node = self.unary()
        while True:
            if self.accept("*"):
                node = ir.mul(node, self.unary())
            elif self.accept("/"):
                node = ir.div(node, self.unary())
            else:
                return node

    def unary(self) -> Node:
        if self.accept("-"):
            return ir.neg(self.unary())
        return self.power()

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
        while True:
            var = self.name("a sum index name")
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
        for var, lower, upper in reversed(specs):
            # ranges left open are inferred from shapes later (function.py); () marks them
            body = (
                ir.Sum(var, lower or (), upper or (), body)
                if lower is None
                else ir.sum_over(var, lower, upper, body)
            )
        return body

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
        if self.accept("-"):
            return -self.affine_unary()
        token = self.tok
        if token.kind == "number":
            if not token.text.isdigit():
                raise self.error(f"index constants must be integers, found {token.text}")
            self.pos += 1
            return Affine.constant(int(token.text))
        if self.accept("("):
            value = self.affine()
            self.expect(")", "')' to close '('")
            return value
        if token.kind != "name":
            raise self.error(f"expected an index expression, found {self._describe(token)}")
        self.pos += 1
        if self.accept("."):
            self.expect("shape", "'shape' after '.'")
            self.expect("[", "'[' after shape")
            dim = self.integer("a dimension")
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
    return _Parser(source).definition()
