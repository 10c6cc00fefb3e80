"""Parser of the kernel IR text (the inverse of printer.py): `parse_kernel(print_kernel(k))`
rebuilds `k`, so `print_kernel(parse_kernel(text)) == text` for printed text.

Errors are `HloParseError`s with file:line:col and the offending line.

    >>> from hlo_codegen.kernel_ir.printer import print_kernel
    >>> text = '''kernel @k grid = [1, 1, 1] block = [4, 1, 1] {
    ...   param @arg0 : f32[4] written
    ...   %th_x = thread_id {dim = x, range = [0, 3]} : index
    ...   %0 = constant {value = 1.5} : f32
    ...   store @arg0 %0, %th_x
    ... }
    ... '''
    >>> print_kernel(parse_kernel(text)) == text
    True
"""

from __future__ import annotations

import re

import numpy as np

from hlo_codegen.indexing import IndexingMap, parse_indexing_map
from hlo_codegen.kernel_ir.builder import NameTable
from hlo_codegen.kernel_ir.ir import OP_SPECS, Block, Buffer, Function, Kernel, Op, Value
from hlo_codegen.kernel_ir.types import is_valid_type
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.errors import HloParseError

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<value>%[A-Za-z0-9_.]+)
  | (?P<symbol>@[A-Za-z0-9_.]+)
  | (?P<map>\#map\d+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<arrow>->)
  | (?P<number>-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*(?:<[^<>]*(?:<[^<>]*>)?[^<>]*>)?)
  | (?P<punct>[=,:()\[\]{}\-])
""", re.VERBOSE)
SYMBOL_KEY = {"load": "buffer", "store": "buffer", "atomic_rmw": "buffer"}


class _Parser:
    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self.maps: dict[str, IndexingMap] = {}
        body_lines = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.startswith("#map"):
                alias, _, rest = line.partition("=")
                self.maps[alias.strip()] = self._parse_map(rest, number)
                body_lines.append(" " * len(line))  # keep offsets aligned with the text
            else:
                body_lines.append(line)
        self.tokens = self._tokenize("\n".join(body_lines))
        self.pos = 0
        self.values: dict[str, Value] = {}

    def _parse_map(self, text: str, line: int) -> IndexingMap:
        try:
            return parse_indexing_map(text.strip())
        except HloParseError as err:
            raise HloParseError(f"bad indexing map: {err.message}", self.filename, line, 1,
                                self.text.splitlines()[line - 1]) from None

    def _tokenize(self, text: str) -> list[tuple[str, str, int]]:
        out, pos = [], 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                self._error(f"unexpected character {text[pos]!r}", pos)
            if m.lastgroup != "ws":
                out.append((m.lastgroup, m.group(), pos))
            pos = m.end()
        out.append(("eof", "", len(text)))
        return out

    # -- token helpers -------------------------------------------------------------------------
    def _error(self, message: str, offset: int | None = None):
        if offset is None:
            offset = self.tokens[self.pos][2]
        line = self.text.count("\n", 0, offset) + 1
        start = self.text.rfind("\n", 0, offset) + 1
        end = self.text.find("\n", offset)
        source = self.text[start:end if end >= 0 else len(self.text)]
        raise HloParseError(message, self.filename, line, offset - start + 1, source)

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def next(self) -> tuple[str, str, int]:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def at(self, text: str) -> bool:
        return self.peek()[1] == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            self._error(f"expected '{text}', found '{self.peek()[1] or 'end of input'}'")

    def expect_kind(self, kind: str) -> str:
        tok = self.next()
        if tok[0] != kind:
            self.pos -= 1
            self._error(f"expected a {kind}, found '{tok[1] or 'end of input'}'")
        return tok[1]

    def int_(self) -> int:
        text = self.expect_kind("number")
        if not re.fullmatch(r"-?\d+", text):
            self._error(f"expected an integer, found {text}")
        return int(text)

    # -- values and types ----------------------------------------------------------------------
    def use(self) -> Value:
        name = self.expect_kind("value")[1:]
        v = self.values.get(name)
        if v is None:
            self.pos -= 1
            self._error(f"use of undefined value %{name}")
        return v

    def define(self, name: str, type_: str) -> Value:
        if name in self.values:
            self._error(f"value %{name} is defined twice")
        v = Value(name, type_)
        self.values[name] = v
        return v

    def type_(self) -> str:
        text = self.expect_kind("ident")
        if not is_valid_type(text):
            self.pos -= 1
            self._error(f"unknown type {text}")
        return text

    def types(self) -> list[str]:
        out = [self.type_()]
        while self.accept(","):
            out.append(self.type_())
        return out

    def map_ref(self) -> IndexingMap:
        alias = self.expect_kind("map")
        if alias not in self.maps:
            self.pos -= 1
            self._error(f"undefined indexing map {alias}")
        return self.maps[alias]

    def attr_value(self):
        kind, text, _ = self.peek()
        if text == "[":
            self.next()
            items = []
            while not self.accept("]"):
                items.append(self.attr_value())
                self.accept(",")
            return items
        if text == "(":
            self.next()
            re_, _, im = self.attr_value(), self.expect(","), self.attr_value()
            self.expect(")")
            return complex(re_, im)
        if text == "-" and self.peek(1)[1] == "inf":
            self.pos += 2
            return float("-inf")
        self.next()
        if kind == "number":
            return int(text) if re.fullmatch(r"-?\d+", text) else float(text)
        if kind == "string":
            return text[1:-1].replace('\\"', '"')
        if kind == "ident":
            return {"true": True, "false": False, "nan": float("nan"), "inf": float("inf")}.get(text, text)
        self.pos -= 1
        self._error(f"bad attribute value '{text}'")

    def attrs(self) -> dict:
        out = {}
        if self.accept("{"):
            while not self.accept("}"):
                key = self.expect_kind("ident")
                self.expect("=")
                out[key] = self.attr_value()
                self.accept(",")
        return out

    # -- ops -----------------------------------------------------------------------------------
    def block(self, args: list[Value]) -> Block:
        block = Block(args, [])
        self.expect("{")
        while not self.accept("}"):
            if self.peek()[0] == "eof":
                self._error("unterminated block")
            block.ops.append(self.op())
        return block

    def op(self) -> Op:
        names = []
        if self.peek()[0] == "value":
            names.append(self._result_name())
            while self.accept(","):
                names.append(self._result_name())
            self.expect("=")
        start = self.pos
        name = self.expect_kind("ident")
        if name not in OP_SPECS:
            self.pos = start
            self._error(f"unknown op '{name}'")
        if name == "loop":
            return self._loop(names)
        if name == "if":
            return self._if(names)
        return self._generic(name, names)

    def _result_name(self) -> str:
        name = self.expect_kind("value")[1:]
        if name in self.values:
            self.pos -= 1
            self._error(f"value %{name} is defined twice")
        return name

    def _results(self, names: list[str], types: list[str]) -> list[Value]:
        if len(names) != len(types):
            self._error(f"{len(names)} results but {len(types)} result types")
        return [self.define(n, t) for n, t in zip(names, types)]

    def _same_line(self, offset: int) -> bool:
        """Whether the next token is on the line of `offset` (an op's operands end with its line)."""
        return "\n" not in self.text[offset:self.peek()[2]]

    def _generic(self, name: str, names: list[str]) -> Op:
        start = self.tokens[self.pos - 1][2]
        attrs = {}
        if self.peek()[0] == "symbol":
            attrs[SYMBOL_KEY.get(name, "callee")] = self.next()[1][1:]
            if self.peek()[0] == "symbol" and "callee" not in attrs:  # atomic_rmw @buffer @callee
                attrs["callee"] = self.next()[1][1:]
        if self.peek()[0] == "map":
            attrs["map"] = self.map_ref()
        operands = []
        if self.peek()[0] == "value" and self._same_line(start):
            operands.append(self.use())
            while self.accept(","):
                operands.append(self.use())
        attrs.update(self.attrs())
        types = self.types() if self.accept(":") else []
        return Op(name, operands, self._results(names, types), attrs)

    def _value_list(self) -> list[str]:
        self.expect("(")
        out = []
        while not self.accept(")"):
            out.append(self.expect_kind("value")[1:])
            self.accept(",")
        return out

    def _loop(self, names: list[str]) -> Op:
        m = self.map_ref()
        self.expect("(")
        dims = []
        while not self.accept(")"):
            dims.append(self.use())
            self.accept(",")
        syms = []
        if self.accept("["):
            while not self.accept("]"):
                syms.append(self.expect_kind("value")[1:])
                self.accept(",")
        self.expect("->")
        indices = self._value_list()
        iter_names, inits = [], []
        if self.accept("iter_args"):
            self.expect("(")
            while not self.accept(")"):
                iter_names.append(self.expect_kind("value")[1:])
                self.expect("=")
                inits.append(self.use())
                self.accept(",")
        if len(dims) != m.num_dims or len(syms) != len(m.range_vars) or len(indices) != m.num_results:
            self._error(f"loop variables do not match {m}")
        attrs = dict(self.attrs() if self.accept("attributes") else {}, map=m)
        types = self.types() if self.accept(":") else []
        results = self._results(names, types)
        args = ([self.define(n, "index") for n in syms + indices]
                + [self.define(n, v.type) for n, v in zip(iter_names, inits)])
        return Op("loop", dims + inits, results, attrs, [self.block(args)])

    def _if(self, names: list[str]) -> Op:
        cond = self.use()
        types = self.types() if self.accept(":") else []
        results = self._results(names, types)
        then_block = self.block([])
        self.expect("else")
        return Op("if", [cond], results, {}, [then_block, self.block([])])

    # -- kernel --------------------------------------------------------------------------------
    def buffer(self, kind: str) -> Buffer:
        name = self.expect_kind("symbol")[1:]
        self.expect(":")
        hlo_type = self.expect_kind("ident")
        if hlo_type not in PRIMITIVE_TYPES:
            self.pos -= 1
            self._error(f"unknown element type {hlo_type}")
        self.expect("[")
        n = self.int_()
        self.expect("]")
        b = Buffer(name, kind, hlo_type, n)
        while self.peek()[1] in ("written", "packed"):
            setattr(b, self.next()[1], True)
        if self.accept("="):
            text = self.expect_kind("ident")
            m = re.fullmatch(r'dense<"0x([0-9A-Fa-f]*)">', text)
            if m is None:
                self.pos -= 1
                self._error("expected dense<\"0x...\"> data")
            raw = np.frombuffer(bytes.fromhex(m.group(1)), np.uint8)
            b.data = raw.view(PRIMITIVE_TYPES[hlo_type].np_dtype).copy()
        return b

    def function(self) -> Function:
        name = self.expect_kind("symbol")[1:]
        self.expect("(")
        args = []
        while not self.accept(")"):
            arg = self.expect_kind("value")[1:]
            self.expect(":")
            args.append(self.define(arg, self.type_()))
            self.accept(",")
        self.expect("->")
        self.expect("(")
        results = [] if self.at(")") else self.types()
        self.expect(")")
        return Function(name, args, results, self.block([]))

    def kernel(self) -> Kernel:
        self.expect("kernel")
        k = Kernel(self.expect_kind("symbol")[1:])
        for key in ("grid", "block"):
            self.expect(key)
            self.expect("=")
            vals = self.attr_value()
            if not (isinstance(vals, list) and len(vals) == 3 and all(isinstance(v, int) for v in vals)):
                self._error(f"{key} must be three integers")
            setattr(k, key, tuple(vals))
        self.expect("{")
        while not self.accept("}"):
            word = self.peek()[1]
            if word in ("param", "shared", "global"):
                self.next()
                k.buffers.append(self.buffer(word))
            elif word == "func":
                self.next()
                k.functions.append(self.function())
            elif self.peek()[0] == "eof":
                self._error("unterminated kernel")
            else:
                k.body.ops.append(self.op())
        if self.peek()[0] != "eof":
            self._error("unexpected text after the kernel")
        names = NameTable()
        for name in self.values:
            names.reserve(name)
        k._names = names
        return k


def parse_kernel(text: str, filename: str = "<kernel>") -> Kernel:
    """Parse one kernel's text (see printer.py for the syntax)."""
    return _Parser(text, filename).kernel()
