"""HLO text parser: the syntax XLA and JAX write today (see xla-facts.md section a).

A hand-written recursive-descent parser over the raw text, so that every error carries
FILE:LINE:COL. It accepts optional `%` sigils, operands with or without shapes, `t#1`
get-tuple-element sugar, stack-frame tables, headerless modules, inline computations,
`{...}` constants (with a warning), and `// -----` separated files via `parse_modules`.

    >>> m = parse_module("HloModule m\\nENTRY e {\\n  ROOT c = f32[] constant(1.5)\\n}")
    >>> float(m.entry.root.literal)
    1.5
"""

from __future__ import annotations

import re

import numpy as np

from hlo_common import attributes as A
from hlo_common.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.errors import HloParseError
from hlo_common.ir import HloComputation, HloInstruction, HloModule
from hlo_common.literal import garbage_literal
from hlo_common.opcodes import ASYNC_REAL_START_DONE, OPCODES
from hlo_common.shape import Layout, Shape

_NAME_RE = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
_ATTR_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_INT_RE = re.compile(r"[+-]?(0x[0-9a-fA-F]+|\d+)")
_NUM_RE = re.compile(
    r"[+-]?(?:nan(?:\(0x[0-9a-fA-F]+\))?|inf|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
)
_WS_RE = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)+", re.S)
_SPLIT_RE = re.compile(r"^// -----.*$", re.M)
_STACK_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def parse_module(text: str, filename: str = "<string>") -> HloModule:
    """Parse one module. Raises HloParseError with FILE:LINE:COL on bad input."""
    return _Parser(text, filename).parse_module()


def parse_modules(text: str, filename: str = "<string>", split: bool = True) -> list[HloModule]:
    """Parse a file that may hold several modules separated by `// -----` lines."""
    if not split:
        return [parse_module(text, filename)]
    modules = [_Parser(chunk, filename, offset).parse_module() for offset, chunk in _split_chunks(text)]
    if not modules:
        raise HloParseError("no HLO module found in input", filename, 1, 1, text.split("\n", 1)[0])
    return modules


def split_module_texts(text: str) -> list[str]:
    """The module texts of a `// -----` separated file (chunks holding only comments are dropped)."""
    return [chunk for _offset, chunk in _split_chunks(text)]


def _split_chunks(text: str) -> list[tuple[int, str]]:
    """(line offset, text) of every chunk between `// -----` lines that holds some code."""
    out = []
    pos = 0
    line_offset = 0
    for m in list(_SPLIT_RE.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        chunk = text[pos:end]
        if chunk.strip() and _has_code(chunk):
            out.append((line_offset, chunk))
        if m is None:
            break
        line_offset += text.count("\n", pos, m.end())
        pos = m.end()
    return out


def _has_code(chunk: str) -> bool:
    stripped = _WS_RE.sub(" ", chunk).strip()
    return bool(stripped)


class _Parser:
    def __init__(self, text: str, filename: str, line_offset: int = 0):
        self.text = text
        self.filename = filename
        self.line_offset = line_offset
        self.pos = 0
        self.module: HloModule | None = None
        self.computations: dict[str, HloComputation] = {}
        self.pending_inline: list[HloComputation] = []
        self.anon_counter = 0

    # -- low level scanning ---------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> HloParseError:
        pos = self.pos if pos is None else pos
        pos = min(pos, len(self.text))
        line_start = self.text.rfind("\n", 0, pos) + 1
        line_end = self.text.find("\n", pos)
        if line_end < 0:
            line_end = len(self.text)
        line = self.text.count("\n", 0, pos) + 1 + self.line_offset
        col = pos - line_start + 1
        return HloParseError(message, self.filename, line, col, self.text[line_start:line_end])

    def ws(self) -> None:
        m = _WS_RE.match(self.text, self.pos)
        if m:
            self.pos = m.end()

    def peek(self, s: str) -> bool:
        self.ws()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.accept(s):
            found = self._found()
            raise self.error(f"expected '{s}'{' ' + what if what else ''}, found {found}")

    def _found(self) -> str:
        self.ws()
        if self.pos >= len(self.text):
            return "end of input"
        m = re.compile(r"[A-Za-z0-9_.%\-]+|.").match(self.text, self.pos)
        return f"'{m.group(0)}'"

    def at_end(self) -> bool:
        self.ws()
        return self.pos >= len(self.text)

    def name(self, what: str = "a name") -> str:
        self.ws()
        m = _NAME_RE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self._found()}")
        self.pos = m.end()
        return m.group(1)

    def peek_name(self) -> str | None:
        self.ws()
        m = _NAME_RE.match(self.text, self.pos)
        return m.group(1) if m else None

    def integer(self, what: str = "an integer") -> int:
        self.ws()
        m = _INT_RE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self._found()}")
        self.pos = m.end()
        return int(m.group(0), 0)

    def string(self) -> str:
        self.ws()
        if not self.text.startswith('"', self.pos):
            raise self.error(f"expected a quoted string, found {self._found()}")
        i = self.pos + 1
        out = []
        while i < len(self.text):
            c = self.text[i]
            if c == "\\" and i + 1 < len(self.text):
                nxt = self.text[i + 1]
                out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\"}.get(nxt, "\\" + nxt))
                i += 2
                continue
            if c == '"':
                self.pos = i + 1
                return "".join(out)
            out.append(c)
            i += 1
        raise self.error("unterminated string")

    def raw_value(self) -> str:
        """Text of an attribute value up to the next top-level ',' / whitespace / closer."""
        self.ws()
        start = i = self.pos
        depth = 0
        text = self.text
        n = len(text)
        while i < n:
            c = text[i]
            if c == '"':
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                i = j + 1
                continue
            if c in "{[(":
                depth += 1
            elif c in "}])":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (c == "," or c.isspace()):
                break
            i += 1
        if depth:
            raise self.error("unbalanced brackets in attribute value", start)
        if i == start:
            raise self.error(f"expected an attribute value, found {self._found()}")
        self.pos = i
        return text[start:i]

    def balanced(self, open_: str = "{", close: str = "}") -> str:
        """Consume `{...}` (nesting and strings respected) and return the inner text."""
        self.expect(open_)
        start = i = self.pos
        depth = 1
        text = self.text
        while i < len(text):
            c = text[i]
            if c == '"':
                j = i + 1
                while j < len(text) and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                i = j + 1
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    self.pos = i + 1
                    return text[start:i]
            i += 1
        raise self.error(f"unterminated '{open_}'", start - 1)

    # -- shapes ---------------------------------------------------------------------------------
    def at_shape(self) -> bool:
        self.ws()
        if self.text.startswith("(", self.pos):
            return True
        m = _ATTR_NAME_RE.match(self.text, self.pos)
        return bool(m and m.group(0) in PRIMITIVE_TYPES and self.text.startswith("[", m.end()))

    def shape(self) -> Shape:
        self.ws()
        if self.accept("("):
            elems = []
            if not self.accept(")"):
                while True:
                    elems.append(self.shape())
                    if self.accept(")"):
                        break
                    self.expect(",", "between tuple element shapes")
            return Shape.tuple_of(elems)
        start = self.pos
        m = _ATTR_NAME_RE.match(self.text, self.pos)
        if not m or m.group(0) not in PRIMITIVE_TYPES:
            raise self.error(f"expected a shape, found {self._found()}")
        etype = PRIMITIVE_TYPES[m.group(0)]
        self.pos = m.end()
        if not self.text.startswith("[", self.pos):
            raise self.error("expected '[' after element type", self.pos)
        self.pos += 1
        dims, dyn = [], []
        self.ws()
        if not self.accept("]"):
            while True:
                self.ws()
                if self.accept("?"):
                    dims.append(-1)
                    dyn.append("?")
                else:
                    bounded = self.accept("<=")
                    dims.append(self.integer("a dimension size"))
                    dyn.append("<=" if bounded else "")
                    if dims[-1] < 0:
                        raise self.error("negative dimension size", start)
                if self.accept("]"):
                    break
                self.expect(",", "between dimensions")
        layout = None
        if self._at_layout():
            layout = self.layout(len(dims))
        if not etype.is_array_type:
            if dims:
                raise self.error(f"{etype.name} shape cannot have dimensions", start)
            return Shape(etype, (), None, None, ())
        if layout is None:
            layout = Layout.default(len(dims))
        return Shape(etype, tuple(dims), layout, None, tuple(dyn))

    def _at_layout(self) -> bool:
        save = self.pos
        self.ws()
        if not self.text.startswith("{", self.pos):
            self.pos = save
            return False
        j = self.pos + 1
        while j < len(self.text) and self.text[j] in " \t":
            j += 1
        ok = j < len(self.text) and (self.text[j].isdigit() or self.text[j] in "}:")
        self.pos = save
        return ok

    def layout(self, rank: int) -> Layout:
        start = self.pos
        self.expect("{")
        m2m = []
        self.ws()
        while self.text[self.pos].isdigit():
            m2m.append(self.integer())
            if not self.accept(","):
                break
        extras = []
        if self.accept(":"):
            while not self.peek("}"):
                self.ws()
                key = None
                for k in ("SC", "D", "T", "L", "#", "*", "E", "S", "P", "M"):
                    if self.text.startswith(k + "(", self.pos):
                        key = k
                        break
                if key is None:
                    raise self.error(f"unknown layout attribute {self._found()}")
                self.pos += len(key)
                if key == "T":
                    tiles = ""
                    while self.text.startswith("(", self.pos):
                        tiles += "(" + self.balanced("(", ")") + ")"
                    extras.append(("T", tiles))
                else:
                    extras.append((key, self.balanced("(", ")")))
        self.expect("}", "to close the layout")
        if m2m and sorted(m2m) != list(range(rank)):
            raise self.error(f"layout {{{','.join(map(str, m2m))}}} is not a permutation of {rank} dims",
                             start)
        if not m2m and rank:
            m2m = list(range(rank - 1, -1, -1))
        return Layout(tuple(m2m), tuple(extras))

    # -- module -----------------------------------------------------------------------------------
    def parse_module(self) -> HloModule:
        self.ws()
        if self.pos >= len(self.text):
            raise self.error("empty input: no HLO module")
        if self.peek_name() == "HloModule":
            self.name()
            self.module = HloModule(self.name("a module name"))
            self.accept(":")  # XLA's lexer takes `name:` as a name too
            while self.accept(","):
                self.header_attr()
        else:
            self.module = HloModule("")
        self.stack_frame_table()
        entry_seen = False
        last = None
        while not self.at_end():
            comp = self.computation()
            last = comp
            if comp.is_entry:
                if entry_seen:
                    raise self.error("more than one ENTRY computation")
                entry_seen = True
        if last is None:
            raise self.error("no computation in module")
        mod = self.module
        if mod.entry is None:
            mod.entry = last
            last.is_entry = True
        if not mod.name:
            mod.name = f"module_{mod.entry.name}"
        self._check_entry_layout()
        return mod

    def header_attr(self) -> None:
        key_pos = self.pos
        key = self.name("a module attribute name")
        self.expect("=")
        if key == "entry_computation_layout":
            self.expect("{")
            self.expect("(")
            params = []
            if not self.accept(")"):
                while True:
                    params.append(self.shape())
                    if self.accept(")"):
                        break
                    self.expect(",")
            self.expect("->")
            result = self.shape()
            self.expect("}")
            self.module.entry_computation_layout = (params, result)
            return
        if key == "is_scheduled":
            val = self.name()
            if val not in ("true", "false"):
                raise self.error("is_scheduled must be true or false", key_pos)
            self.module.is_scheduled = val == "true"
            return
        self.module.header_attrs.append((key, self.raw_value()))

    def stack_frame_table(self) -> None:
        sections = []
        while self.peek_name() in _STACK_SECTIONS:
            sec = self.name()
            entries = []
            while True:
                self.ws()
                if not (self.pos < len(self.text) and self.text[self.pos].isdigit()):
                    break
                ident = self.integer()
                self.ws()
                if self.text.startswith('"', self.pos):
                    entries.append(f"{ident} {A.quote_string(self.string())}")
                else:
                    entries.append(f"{ident} {{{' '.join(self.balanced().split())}}}")
            sections.append(sec + "\n" + "".join(f"  {e}\n" for e in entries))
        if sections:
            self.module.stack_frames = "\n".join(sections)

    def _check_entry_layout(self) -> None:
        mod = self.module
        if mod.entry_computation_layout is None:
            return
        params, _result = mod.entry_computation_layout
        if len(params) != len(mod.entry.parameters):
            raise HloParseError(
                f"entry_computation_layout has {len(params)} parameters but the entry computation has "
                f"{len(mod.entry.parameters)}", self.filename, 1 + self.line_offset, 1)

    # -- computations -----------------------------------------------------------------------------
    def computation(self, inline_name: str | None = None) -> HloComputation:
        is_entry = False
        start = self.pos
        if inline_name is None:
            if self.peek_name() == "ENTRY":
                self.name()
                is_entry = True
            name = self.name("a computation name")
            if name in self.computations:
                raise self.error(f"computation '{name}' is defined twice", start)
            if self.peek("("):
                self.signature()
        else:
            name = inline_name
        comp = HloComputation(name)
        self.computations[name] = comp
        self.expect("{", f"to open computation '{name}'")
        scope: dict[str, HloInstruction] = {}
        root = None
        saved_inline = self.pending_inline
        self.pending_inline = []
        while not self.accept("}"):
            if self.at_end():
                raise self.error(f"unexpected end of input in computation '{name}'")
            instr, is_root = self.instruction(comp, scope)
            if is_root:
                if root is not None:
                    raise self.error(f"computation '{name}' has more than one ROOT")
                root = instr
        inline = self.pending_inline
        self.pending_inline = saved_inline
        if not comp.instructions:
            raise self.error(f"computation '{name}' has no instructions", start)
        comp.root = root if root is not None else comp.instructions[-1]
        if self.accept(","):
            key = self.name()
            if key != "execution_thread":
                raise self.error(f"unknown computation attribute '{key}'")
            self.expect("=")
            comp.execution_thread = self.string()
        self._check_parameters(comp, start)
        for c in inline:
            self.module.add_computation(c)
        if inline_name is None:
            self.module.add_computation(comp, entry=is_entry)
        return comp

    def signature(self) -> None:
        self.expect("(")
        if not self.accept(")"):
            while True:
                self.name("a parameter name")
                self.expect(":")
                self.shape()
                if self.accept(")"):
                    break
                self.expect(",", "between parameters")
        self.expect("->")
        self.shape()

    def _check_parameters(self, comp: HloComputation, pos: int) -> None:
        nums = sorted(p.parameter_number for p in comp.instructions if p.opcode == "parameter")
        if nums != list(range(len(nums))):
            raise self.error(f"computation '{comp.name}' has parameter numbers {nums}, "
                             f"expected 0..{len(nums) - 1}", pos)

    # -- instructions -----------------------------------------------------------------------------
    def instruction(self, comp: HloComputation, scope: dict) -> tuple[HloInstruction, bool]:
        self.ws()
        start = self.pos
        is_root = False
        if self.peek_name() == "ROOT":
            self.name()
            is_root = True
        name_pos = self.pos
        name = self.name("an instruction name")
        if name in PRIMITIVE_TYPES:
            raise self.error(f"'{name}' is a type keyword and cannot name an instruction", name_pos)
        if name in scope:
            raise self.error(f"instruction '{name}' is defined twice in computation '{comp.name}'",
                             name_pos)
        self.expect("=", f"after instruction name '{name}'")
        instr = self.instruction_body(name, comp, scope, start)
        scope[name] = instr
        return instr, is_root

    def instruction_body(self, name: str, comp: HloComputation, scope: dict, start: int) -> HloInstruction:
        shape = self.shape() if self.at_shape() else None
        op_pos = self.pos
        self.ws()
        op_pos = self.pos
        opcode = self.name("an opcode")
        async_wrapped = None
        if opcode not in OPCODES:
            for suffix in ("-start", "-update", "-done"):
                base = opcode[: -len(suffix)]
                if opcode.endswith(suffix) and base in OPCODES and base not in ASYNC_REAL_START_DONE:
                    async_wrapped = (base, suffix)
                    break
            if async_wrapped is None:
                raise self.error(f"unknown opcode '{opcode}'", op_pos)
        instr = HloInstruction(name, opcode, shape)
        self.operands(instr, scope, comp)
        while self.accept(","):
            self.attribute(instr, scope)
        if async_wrapped is not None:
            instr.attrs["async_wrapped_opcode"] = A.RawAttr(opcode)
            instr.opcode = "async" + async_wrapped[1]
        if instr.shape is None:
            from hlo_common.shape_inference import infer_shape

            try:
                instr.shape = infer_shape(instr)
            except Exception as exc:  # noqa: BLE001 - any inference failure is a user error here
                raise self.error(f"cannot infer the shape of '{name}' ({opcode}); write it out: {exc}",
                                 op_pos) from None
        if instr.opcode == "constant":
            self._check_literal(instr, op_pos)
        comp.add_instruction(instr)
        return instr

    def operands(self, instr: HloInstruction, scope: dict, comp: HloComputation) -> None:
        self.expect("(", f"after opcode '{instr.opcode}'")
        if instr.opcode == "parameter":
            instr.parameter_number = self.integer("a parameter number")
            self.expect(")")
            return
        if instr.opcode == "constant":
            self.constant_literal(instr)
            self.expect(")", "after the constant's literal")
            return
        if self.accept(")"):
            return
        while True:
            op = self.operand(scope, comp)
            instr.operands.append(op)
            if instr not in op.users:
                op.users.append(instr)
            if self.accept(")"):
                break
            self.expect(",", "between operands")

    def operand(self, scope: dict, comp: HloComputation) -> HloInstruction:
        self.ws()
        if self.at_shape():
            save = self.pos
            self.shape()
            self.ws()
            # A nested anonymous instruction: `f32[] constant(1)` written inline as an operand.
            m = _NAME_RE.match(self.text, self.pos)
            if m and m.group(1) in OPCODES and self.text.startswith("(", m.end()) and \
                    not self.text.startswith("%", self.pos):
                self.pos = save
                self.anon_counter += 1
                return self.instruction_body(f"{comp.name}.anon.{self.anon_counter}", comp, scope, save)
        pos = self.pos
        name = self.name("an operand name")
        if name not in scope:
            raise self.error(f"operand '{name}' is not defined in computation '{comp.name}' "
                             "(operands must be defined before use)", pos)
        instr = scope[name]
        while self.text.startswith("#", self.pos):
            self.pos += 1
            idx = self.integer("a tuple index")
            instr = self._gte(instr, idx, scope, comp, pos)
        return instr

    def _gte(self, tup: HloInstruction, idx: int, scope: dict, comp: HloComputation, pos: int):
        key = f"{tup.name}#{idx}"
        if key in scope:
            return scope[key]
        if not tup.shape.is_tuple or idx >= len(tup.shape.tuple_shapes):
            raise self.error(f"'{key}': '{tup.name}' has no tuple element {idx}", pos)
        g = HloInstruction(comp.unique_name(f"{tup.name}.{idx}"), "get-tuple-element",
                           tup.shape.tuple_shapes[idx], [tup], {"index": idx})
        comp.add_instruction(g)
        scope[key] = g
        return g

    # -- attributes -------------------------------------------------------------------------------
    def attribute(self, instr: HloInstruction, scope: dict) -> None:
        self.ws()
        pos = self.pos
        m = _ATTR_NAME_RE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected an attribute name, found {self._found()}")
        key = m.group(0)
        self.pos = m.end()
        self.expect("=", f"after attribute '{key}'")
        if key in instr.attrs or (key in ("metadata", "sharding", "backend_config") and getattr(instr, key)):
            raise self.error(f"attribute '{key}' given twice", pos)
        try:
            self._attribute_value(instr, key, scope, pos)
        except ValueError as exc:
            raise self.error(f"bad value for attribute '{key}': {exc}", pos) from None

    def _attribute_value(self, instr: HloInstruction, key: str, scope: dict, pos: int) -> None:
        if key == "metadata":
            instr.metadata = self.key_values()
        elif key == "frontend_attributes":
            instr.frontend_attributes = sorted(self.key_values())
        elif key == "sharding":
            instr.sharding = self.raw_value()
        elif key == "backend_config":
            self.ws()
            if self.text.startswith('"', self.pos):
                instr.backend_config = A.quote_string(self.string())
            else:
                instr.backend_config = self.raw_value()
        elif key == "control-predecessors":
            self.expect("{")
            if not self.accept("}"):
                while True:
                    p = self.pos
                    n = self.name("a control predecessor")
                    if n not in scope:
                        raise self.error(f"control predecessor '{n}' is not defined", p)
                    scope[n].add_control_dependency_to(instr)
                    if self.accept("}"):
                        break
                    self.expect(",")
        elif key in A.COMPUTATION_ATTR_KINDS:
            instr.attrs[key] = self.computation_ref(A.COMPUTATION_ATTR_KINDS[key], key)
        elif key in A.ATTR_KINDS:
            instr.attrs[key] = self.typed_value(A.ATTR_KINDS[key], key)
        elif key in ("origin", "statistics", "parameter_replication"):
            instr.extra_common.append((key, self.raw_value()))
        else:
            instr.attrs[key] = A.RawAttr(self.raw_value())

    def key_values(self) -> list[tuple[str, str]]:
        """`{k="v" k2=3 k3={...}}` (metadata, frontend attributes) as (key, value text) pairs."""
        self.expect("{")
        out = []
        while not self.accept("}"):
            k = self.name("a key")
            self.expect("=")
            self.ws()
            if self.text.startswith('"', self.pos):
                out.append((k, A.quote_string(self.string())))
            else:
                out.append((k, self.raw_value()))
            self.accept(",")
        return out

    def computation_ref(self, kind: str, key: str):
        self.ws()
        if kind == "comps" or (kind == "comp_or_comps" and self._brace_list_of_names()):
            self.expect("{")
            comps = []
            if not self.accept("}"):
                while True:
                    comps.append(self._one_comp(key))
                    if self.accept("}"):
                        break
                    self.expect(",")
            return comps
        return self._one_comp(key)

    def _brace_list_of_names(self) -> bool:
        m = re.compile(r"\{\s*(%?[A-Za-z_][\w.\-]*\s*(,|\}))").match(self.text, self.pos)
        return bool(m) and not re.compile(r"\{\s*ROOT\b").match(self.text, self.pos)

    def _one_comp(self, key: str) -> HloComputation:
        self.ws()
        if self.text.startswith("{", self.pos):
            self.anon_counter += 1
            comp = self.computation(inline_name=f"{key}.inline.{self.anon_counter}")
            self.pending_inline.append(comp)
            return comp
        pos = self.pos
        n = self.name("a computation name")
        if n not in self.computations:
            raise self.error(f"computation '{n}' is not defined (called computations must come first)",
                             pos)
        return self.computations[n]

    def typed_value(self, kind: str, key: str):
        self.ws()
        if kind == "ints":
            self.expect("{")
            vals = []
            if not self.accept("}"):
                while True:
                    vals.append(self.integer())
                    if self.accept("}"):
                        break
                    self.expect(",")
            return tuple(vals)
        if kind == "int":
            return self.integer()
        if kind == "bool":
            v = self.name("true or false")
            if v not in ("true", "false"):
                raise ValueError(f"expected true or false, found '{v}'")
            return v == "true"
        if kind == "float":
            m = _NUM_RE.match(self.text, self.pos)
            if not m:
                raise ValueError("expected a number")
            self.pos = m.end()
            return float(m.group(0))
        if kind == "string":
            return self.string()
        if kind == "word":
            return self.raw_value()
        if kind == "slice":
            return self.slice_spec()
        if kind == "padding":
            return A.PaddingConfig.parse(self.raw_value())
        if kind == "window":
            return A.Window.parse(self.balanced())
        if kind == "dim_labels":
            return A.ConvDimensionNumbers.parse(self.raw_value())
        if kind == "shapes":
            self.expect("{")
            shapes = []
            if not self.accept("}"):
                while True:
                    shapes.append(self.shape())
                    if self.accept("}"):
                        break
                    self.expect(",")
            return tuple(shapes)
        raise AssertionError(kind)

    def slice_spec(self) -> A.SliceSpec:
        self.expect("{")
        dims = []
        if not self.accept("}"):
            while True:
                self.expect("[")
                s = self.integer()
                self.expect(":")
                lim = self.integer()
                st = 1
                if self.accept(":"):
                    st = self.integer()
                self.expect("]")
                dims.append((s, lim, st))
                if self.accept("}"):
                    break
                self.expect(",")
        return A.SliceSpec(tuple(dims))

    # -- literals ---------------------------------------------------------------------------------
    def constant_literal(self, instr: HloInstruction) -> None:
        self.ws()
        if instr.shape is None:
            raise self.error("a constant needs its shape written out")
        if self.at_shape() and not self.text.startswith("(", self.pos):
            self.shape()  # old style: the literal repeats its shape
        if instr.shape.is_tuple:
            instr.literal = self.tuple_literal(instr.shape)
            return
        if self.text.startswith("{...}", self.pos):
            self.pos += 5
            instr.literal_unknown = True
            instr.literal = garbage_literal(instr.shape.dims, instr.shape.element_type, instr.name)
            self.module.warnings.append(
                f"constant '{instr.name}' was printed as {{...}}: its values are unknown and were "
                "replaced by deterministic stand-ins")
            return
        instr.literal = self.array_literal(instr.shape)

    def tuple_literal(self, shape: Shape):
        self.expect("(")
        vals = []
        for i, s in enumerate(shape.tuple_shapes):
            if i:
                self.expect(",")
            if self.at_shape() and not self.text.startswith("(", self.pos):
                self.shape()
            vals.append(self.tuple_literal(s) if s.is_tuple else self.array_literal(s))
        self.expect(")")
        return tuple(vals)

    def array_literal(self, shape: Shape) -> np.ndarray:
        et = shape.element_type
        start = self.pos
        flat: list = []
        if shape.rank == 0:
            self.ws()
            if self.accept("{"):  # `{5}` is accepted for a scalar too
                flat.append(self.scalar(et))
                self.expect("}")
            else:
                flat.append(self.scalar(et))
        elif not self.peek("{"):
            # XLA accepts a scalar for an array constant and broadcasts it.
            flat.extend([self.scalar(et)] * shape.num_elements)
        else:
            self._nested(shape.dims, 0, et, flat)
        if len(flat) != shape.num_elements:
            raise self.error(f"literal has {len(flat)} elements, shape {shape} needs "
                             f"{shape.num_elements}", start)
        return _to_array(flat, et, shape.dims, self, start)

    def _nested(self, dims, level: int, et: PrimitiveType, flat: list) -> None:
        self.expect("{")
        if level == len(dims) - 1:
            if not self.accept("}"):
                while True:
                    flat.append(self.scalar(et))
                    if self.accept("}"):
                        break
                    self.expect(",", "between literal elements")
            return
        if self.accept("}"):
            return
        while True:
            self._nested(dims, level + 1, et, flat)
            if self.accept("}"):
                break
            self.expect(",", "between literal rows")

    def scalar(self, et: PrimitiveType):
        self.ws()
        if et.is_complex:
            self.expect("(")
            re_ = _plain(self.scalar_number())
            self.expect(",")
            im = _plain(self.scalar_number())
            self.expect(")")
            return complex(re_, im)
        for word, val in (("true", True), ("false", False)):
            if self.text.startswith(word, self.pos) and not self.text[self.pos + len(word):][:1].isalnum():
                self.pos += len(word)
                return val
        return self.scalar_number()

    def scalar_number(self):
        self.ws()
        m = _NUM_RE.match(self.text, self.pos)
        if not m:
            m2 = _INT_RE.match(self.text, self.pos)
            if not m2:
                raise self.error(f"expected a literal value, found {self._found()}")
            m = m2
        self.pos = m.end()
        tok = m.group(0)
        if tok.lstrip("+-").startswith("0x"):
            return int(tok, 16)
        if "nan" in tok:
            payload = None
            pm = re.search(r"0x([0-9a-fA-F]+)", tok)
            if pm:
                payload = int(pm.group(1), 16)
            return _NanToken(tok.startswith("-"), payload)
        if re.fullmatch(r"[+-]?\d+", tok):
            return int(tok)
        return float(tok)

    def _check_literal(self, instr: HloInstruction, pos: int) -> None:
        if instr.literal is None:
            raise self.error(f"constant '{instr.name}' has no value", pos)


def _plain(v):
    if isinstance(v, _NanToken):
        return -float("nan") if v.negative else float("nan")
    return v


class _NanToken:
    __slots__ = ("negative", "payload")

    def __init__(self, negative: bool, payload: int | None):
        self.negative = negative
        self.payload = payload


_NAN_BITS = {  # dtype -> (uint view, sign bit, exponent mask, quiet bit)
    "f16": (np.uint16, 0x8000, 0x7C00, 0x200),
    "bf16": (np.uint16, 0x8000, 0x7F80, 0x40),
    "f32": (np.uint32, 0x80000000, 0x7F800000, 0x400000),
    "f64": (np.uint64, 0x8000000000000000, 0x7FF0000000000000, 0x8000000000000),
}


def _to_array(flat: list, et: PrimitiveType, dims, parser: _Parser, pos: int) -> np.ndarray:
    nan_slots = [(i, v) for i, v in enumerate(flat) if isinstance(v, _NanToken)]
    vals = [float("nan") if isinstance(v, _NanToken) else v for v in flat]
    try:
        if et.is_pred:
            arr = np.array([bool(v) for v in vals], dtype=np.bool_)
        elif et.is_integer:
            info_min, info_max = _int_range(et)
            for v in vals:
                if not isinstance(v, (int, bool)) or not (info_min <= int(v) <= info_max):
                    if isinstance(v, float) and v.is_integer() and info_min <= v <= info_max:
                        continue
                    raise parser.error(f"value {v} is out of range for {et.name}", pos)
            arr = np.array([int(v) for v in vals], dtype=np.int64 if et.kind == "signed" else np.uint64)
            arr = arr.astype(et.np_dtype)
        elif et.is_complex:
            arr = np.array(vals, dtype=et.np_dtype)
        else:
            arr = np.array(vals, dtype=np.float64).astype(et.np_dtype)
    except OverflowError:
        raise parser.error(f"literal value out of range for {et.name}", pos) from None
    if nan_slots and et.name in _NAN_BITS:
        utype, sign, exp, quiet = _NAN_BITS[et.name]
        bits = arr.view(utype)
        for i, tok in nan_slots:
            payload = quiet if tok.payload is None else tok.payload
            bits[i] = utype(exp | payload | (sign if tok.negative else 0))
    return arr.reshape(dims)


def _int_range(et: PrimitiveType) -> tuple[int, int]:
    if et.kind == "signed":
        return -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
    return 0, (1 << et.bits) - 1
