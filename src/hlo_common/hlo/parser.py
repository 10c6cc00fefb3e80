"""HLO text parser: the syntax XLA and JAX write today (see xla-facts.md section a).

The front door of every tool: text in, `HloModule` out. A hand-written recursive-descent parser
over the raw text (`parser_scanner`), so that every error is an `HloParseError` carrying
FILE:LINE:COL and the offending line. It accepts optional `%` sigils, operands with or without
shapes, nested anonymous operand instructions (`add(f32[] constant(1), x)`), `t#1` / `t#0#2`
get-tuple-element sugar, async sugar (`custom-call-start`), stack-frame tables, headerless
modules, inline computations (`to_apply={...}`), `{...}` constants (with a module warning), and
`// -----` separated files (`parse_modules`, `split_module_texts`). Attributes are read by
`parser_attributes`, literals by `parser_literals`.

    >>> m = parse_module("HloModule m\\nENTRY e {\\n  ROOT c = f32[] constant(1.5)\\n}")
    >>> float(m.entry.root.literal)
    1.5
"""

from __future__ import annotations

import re

from hlo_common.hlo.attributes import RawAttr
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.errors import HloParseError
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.opcodes import ASYNC_REAL_START_DONE, OPCODES
from hlo_common.hlo.parser_attr_rules import attribute_rules, missing_required, operand_rules
from hlo_common.hlo.parser_attributes import AttributeParsing
from hlo_common.hlo.parser_scanner import MAX_NESTING, NAME_RE, WS_RE

# A line `// -----` (not followed by more dashes: `// -------` is a comment, as in MLIR's
# split-input-file) separates modules.
_SPLIT_RE = re.compile(r"^// -----(?!-).*$", re.M)
_STACK_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_STACK_ENTRY_RE = re.compile(r'\d+\s+(?:"(?:[^"\\]|\\.)*"|\{[^{}]*\})', re.S)


def parse_module(text: str, filename: str = "<string>") -> HloModule:
    """Parse one module. Raises HloParseError with FILE:LINE:COL on bad input."""
    return _parse_chunk(text, filename, 0)


def parse_modules(text: str, filename: str = "<string>", split: bool = True) -> list[HloModule]:
    """Parse a file that may hold several modules separated by `// -----` lines."""
    if not split:
        return [parse_module(text, filename)]
    modules = [_parse_chunk(chunk, filename, offset) for offset, chunk in _split_chunks(text)]
    if not modules:
        raise HloParseError("no HLO module found in input", filename, 1, 1, text.split("\n", 1)[0])
    return modules


def split_module_texts(text: str) -> list[str]:
    """The module texts of a `// -----` separated file (chunks holding only comments are dropped)."""
    return [chunk for _offset, chunk in _split_chunks(text)]


def _parse_chunk(text: str, filename: str, line_offset: int) -> HloModule:
    parser = _Parser(text, filename, line_offset)
    try:
        return parser.parse_module()
    except RecursionError:
        raise parser.error("input nested too deeply") from None


def _split_chunks(text: str) -> list[tuple[int, str]]:
    """(line offset, text) of every chunk between `// -----` lines that holds some code."""
    out = []
    pos = 0
    line_offset = 0
    for m in list(_SPLIT_RE.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        chunk = text[pos:end]
        if WS_RE.sub("", chunk).strip():
            out.append((line_offset, chunk))
        if m is None:
            break
        line_offset += text.count("\n", pos, m.end())
        pos = m.end()
    return out


class _Parser(AttributeParsing):
    def __init__(self, text: str, filename: str, line_offset: int = 0):
        super().__init__(text, filename, line_offset)
        self.module: HloModule | None = None
        self.computations: dict[str, HloComputation] = {}
        self.pending_inline: list[HloComputation] = []
        self.depth = 0
        self.open_computations: set[str] = set()  # being parsed: a call of one of them is a cycle
        self._root_pos = 0
        self.single: HloComputation | None = None  # the computation of a single-instruction text

    # -- module -----------------------------------------------------------------------------------
    def parse_module(self) -> HloModule:
        if self.at_end():
            raise self.error("empty input: no HLO module")
        if self.peek_name() == "HloModule" and not self.text.startswith("%", self.pos):
            self.name()
            self.module = HloModule(self.name("a module name"))
            self.accept(":")  # XLA's lexer takes `name:` as a name too
            while self.accept(","):
                self.header_attr()
        elif self._at_single_instruction():
            return self.single_instruction()
        else:
            self.module = HloModule("")
        self.stack_frame_table()
        entry = last = None
        while not self.at_end():
            start = self.pos
            comp, is_entry = self.computation()
            last = comp
            if is_entry:
                if entry is not None:
                    raise self.error("more than one ENTRY computation", start)
                entry = comp
        if last is None:
            raise self.error("no computation in module")
        mod = self.module
        mod.entry = entry or last
        mod.entry.is_entry = True
        if not mod.name:
            mod.name = f"module_{mod.entry.name}"
        self._check_entry_layout()
        self._check_call_depth(mod)
        return mod

    def _check_call_depth(self, module: HloModule) -> None:
        from hlo_common.hlo.call_depth import MAX_CALL_DEPTH, too_deep_call

        instr = too_deep_call(module)
        if instr is not None:
            pos = instr.source[1] if instr.source is not None else self.pos
            raise self.error(f"computations nest more than {MAX_CALL_DEPTH} deep: %{instr.name} calls level "
                             f"{MAX_CALL_DEPTH + 1} of a chain of calls, while loops and conditionals "
                             f"(the limit is {MAX_CALL_DEPTH})", pos)

    def _at_single_instruction(self) -> bool:
        """Text that starts like an instruction (`x = ...` or a shape), not like a computation."""
        if self.at_shape():
            return True
        m = NAME_RE.match(self.text, self.pos)
        if not m or m.group(1) in ("ENTRY", "ROOT"):
            return m is not None and m.group(1) == "ROOT"
        rest = WS_RE.match(self.text, m.end())
        return self.text.startswith("=", rest.end() if rest else m.end())

    def single_instruction(self) -> HloModule:
        """XLA's ParseSingleInstruction: one instruction becomes a scheduled module `_`; operands
        that have a shape but are not defined become parameters (`_0`, `_1` when nameless)."""
        self.module = HloModule("_")
        comp = HloComputation("_")
        self.single = comp
        scope: dict[str, HloInstruction] = {}
        if self.at_shape():
            instr = self.instruction_body("_", comp, scope, allow_attributes=True)
        else:
            instr, _ = self.instruction(comp, scope)
        if not self.at_end():
            raise self.error("expected the end of the text after a single instruction (a module needs an "
                             "'HloModule' header or an ENTRY computation)")
        comp.root = instr
        self._check_parameters(comp, 0)
        for c in self.pending_inline:
            self.module.add_computation(c)
        self.module.add_computation(comp, entry=True)
        self.module.is_scheduled = True
        return self.module

    def _missing_parameter(self, name: str, shape, comp: HloComputation, scope: dict) -> HloInstruction:
        number = sum(1 for i in comp.instructions if i.opcode == "parameter")
        param = HloInstruction(name or f"_{number}", "parameter", shape)
        param.parameter_number = number
        comp.add_instruction(param)
        scope[param.name] = param
        return param

    def header_attr(self) -> None:
        key_pos = self.pos
        key = self.word("a module attribute name")
        self.expect("=", f"after '{key}'")
        if key == "entry_computation_layout":
            self.expect("{")
            params = []
            self.expect("(")
            if not self.accept(")"):
                while True:
                    params.append(self.shape())
                    if self.accept(")"):
                        break
                    self.expect(",", "between parameter shapes")
            self.expect("->")
            result = self.shape()
            self.expect("}", "to close entry_computation_layout")
            self.module.entry_computation_layout = (params, result)
        elif key == "is_scheduled":
            val = self.word("true or false")
            if val not in ("true", "false"):
                raise self.error("is_scheduled must be true or false", key_pos)
            self.module.is_scheduled = val == "true"
        elif any(k == key for k, _ in self.module.header_attrs):
            raise self.error(f"module attribute '{key}' given twice", key_pos)
        else:
            self.module.header_attrs.append((key, self.raw_value()))

    def stack_frame_table(self) -> None:
        """`FileNames 1 "a.py" FunctionNames ... FileLocations 1 {...} StackFrames 1 {...}`."""
        sections = []
        while self.peek_name() in _STACK_SECTIONS:
            sec = self.name()
            entries = []
            while True:
                self.ws()
                m = _STACK_ENTRY_RE.match(self.text, self.pos)
                if not m:
                    if self.pos < len(self.text) and self.text[self.pos].isdigit():
                        raise self.error(f"malformed {sec} entry")
                    break
                self.pos = m.end()
                entries.append(" ".join(m.group(0).split()))
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
    def computation(self) -> tuple[HloComputation, bool]:
        if self.peek_name() == "HloModule" and not self.text.startswith("%", self.pos):
            raise self.error("a second 'HloModule' in one module text (separate modules with a "
                             "'// -----' line and read them with --split-input-file / parse_modules)")
        is_entry = self.peek_name() == "ENTRY" and not self.text.startswith("%", self.pos)
        if is_entry:
            self.name()
        self.ws()
        name_pos = self.pos
        name = self.name("a computation name")
        if name in self.computations:
            raise self.error(f"computation '{name}' is defined twice", name_pos)
        result = self.signature() if self.peek("(") else None
        comp = self.instruction_list(name)
        if result is not None and not result[1].compatible(comp.root.shape):
            raise self.error(f"computation '{name}' is declared to return {result[1].to_string(False)} "
                             f"but its root returns {comp.root.shape.to_string(False)}", result[0])
        if self.accept(","):
            key = self.word("a computation attribute")
            if key != "execution_thread":
                raise self.error(f"unknown computation attribute '{key}'")
            self.expect("=")
            comp.execution_thread = self.string()
        self.module.add_computation(comp, entry=is_entry)
        return comp, is_entry

    def inline_computation(self, base: str) -> HloComputation:
        """`to_apply={ ... }`: a computation written in place; added before its caller."""
        name = base
        k = 0
        while name in self.computations:
            k += 1
            name = f"{base}.{k}"
        comp = self.instruction_list(name)
        self.pending_inline.append(comp)
        return comp

    def instruction_list(self, name: str) -> HloComputation:
        start = self.pos
        comp = HloComputation(name)
        self.computations[name] = comp
        self.open_computations.add(name)
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error("computations nested too deeply")
        self.expect("{", f"to open computation '{name}'")
        scope: dict[str, HloInstruction] = {}
        root = None
        saved_inline, self.pending_inline = self.pending_inline, []
        while not self.accept("}"):
            if self.at_end():
                raise self.error(f"unexpected end of input in computation '{name}'")
            instr, is_root = self.instruction(comp, scope)
            if is_root:
                if root is not None:
                    raise self.error(f"computation '{name}' has more than one ROOT", self._root_pos)
                root = instr
        inline, self.pending_inline = self.pending_inline, saved_inline
        self.open_computations.discard(name)
        self.depth -= 1
        if not comp.instructions:
            raise self.error(f"computation '{name}' has no instructions", start)
        comp.root = root if root is not None else comp.instructions[-1]
        self._check_parameters(comp, start)
        for c in inline:
            self.module.add_computation(c)
        return comp

    def signature(self) -> tuple[int, object]:
        """`(p0: f32[8], p1: s32[]) -> f32[8]`; returns (position, result shape)."""
        self.expect("(")
        if not self.accept(")"):
            while True:
                self.name("a parameter name")
                self.expect(":", "after the parameter name")
                self.shape()
                if self.accept(")"):
                    break
                self.expect(",", "between parameters")
        self.expect("->", "after the parameter list")
        self.ws()
        return self.pos, self.shape()

    def _check_parameters(self, comp: HloComputation, pos: int) -> None:
        nums = sorted(p.parameter_number for p in comp.instructions if p.opcode == "parameter")
        if nums != list(range(len(nums))):
            raise self.error(f"computation '{comp.name}' has parameter numbers {nums}, "
                             f"expected 0..{len(nums) - 1}", pos)

    # -- instructions -----------------------------------------------------------------------------
    def instruction(self, comp: HloComputation, scope: dict) -> tuple[HloInstruction, bool]:
        self.ws()
        is_root = self.peek_name() == "ROOT" and not self.text.startswith("%", self.pos)
        if is_root:
            self._root_pos = self.pos
            self.name()
        self.ws()
        name_pos = self.pos
        name = self.name("an instruction name")
        self._check_name(name, name_pos)
        if name in scope:
            raise self.error(f"instruction '{name}' is defined twice in computation '{comp.name}'",
                             name_pos)
        self.expect("=", f"after instruction name '{name}'")
        instr = self.instruction_body(name, comp, scope, allow_attributes=True)
        instr.source = (self.source_text, name_pos)
        scope[name] = instr
        return instr, is_root

    def _check_name(self, name: str, pos: int) -> None:
        if name in PRIMITIVE_TYPES:
            raise self.error(f"illegal instruction name '{name}' (a type keyword); suggest renaming "
                             f"to '{name}_'", pos)
        if name.startswith("__") and not name.startswith("__xla_"):
            raise self.error(f"illegal instruction name '{name}' (a '__' prefix is reserved); suggest "
                             f"renaming to '{name[1:]}'", pos)

    def instruction_body(self, name: str, comp: HloComputation, scope: dict,
                         allow_attributes: bool) -> HloInstruction:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error("instructions nested too deeply")
        shape = self.shape() if self.at_shape() else None
        self.ws()
        op_pos = self.pos
        opcode, wrapped = self.opcode()
        if shape is None and not (OPCODES[opcode].can_infer_shape and wrapped is None):
            raise self.error(f"cannot infer the shape of opcode '{wrapped or opcode}': write the shape "
                             "before the opcode", op_pos)
        instr = HloInstruction(name, opcode, shape)
        instr.source = (self.source_text, op_pos)
        self.operands(instr, scope, comp)
        attrs_pos = self.pos
        required, allowed = operand_rules(instr, *attribute_rules(opcode, wrapped))
        seen: set[str] = set()
        while allow_attributes and self.accept(","):
            self.attribute(instr, scope, seen, allowed)
        missing = missing_required(instr, required, seen)
        if missing:
            raise self.error(missing, attrs_pos)
        if wrapped is not None:
            instr.attrs["async_wrapped_opcode"] = RawAttr(wrapped)
        self._check_arity(instr, wrapped, op_pos)
        if instr.shape is None:
            self._infer_shape(instr, op_pos)
        if not name:
            instr.name = comp.unique_name(f"{opcode}.anon")
            scope[instr.name] = instr
        comp.add_instruction(instr)
        self.depth -= 1
        return instr

    def opcode(self) -> tuple[str, str | None]:
        """(opcode, written name of an async-sugar op such as `custom-call-start`, or None)."""
        pos = self.pos
        word = self.word("an opcode")
        if word in OPCODES:
            return word, None
        for suffix in ("-start", "-update", "-done"):
            base = word[: -len(suffix)]
            if word.endswith(suffix) and base in OPCODES and base not in ASYNC_REAL_START_DONE:
                return "async" + suffix, word
        raise self.error(f"unknown opcode '{word}'", pos)

    def _check_arity(self, instr: HloInstruction, wrapped: str | None, pos: int) -> None:
        arity = OPCODES[instr.opcode].arity
        if wrapped is None and arity is not None and instr.opcode not in ("parameter", "constant") \
                and len(instr.operands) != arity:
            raise self.error(f"'{instr.opcode}' expects {arity} operand{'s' * (arity != 1)}, but has "
                             f"{len(instr.operands)}", pos)

    def _infer_shape(self, instr: HloInstruction, pos: int) -> None:
        from hlo_common.hlo.shape_inference import infer_shape

        try:
            instr.shape = infer_shape(instr)
        except Exception as exc:  # noqa: BLE001 - any failure of inference is this input's error
            raise self.error(f"cannot infer the shape of '{instr.name or instr.opcode}' ({instr.opcode}); "
                             f"write it out: {exc}", pos) from None

    def operands(self, instr: HloInstruction, scope: dict, comp: HloComputation) -> None:
        self.expect("(", f"after opcode '{instr.opcode}'")
        if instr.opcode == "parameter":
            pos = self.pos
            instr.parameter_number = self.integer("a parameter number")
            if instr.parameter_number < 0:
                raise self.error("a parameter number must be >= 0", pos)
            self.expect(")", "after the parameter number")
            if instr.shape is None:
                raise self.error("a parameter needs its shape written out", pos)
            return
        if instr.opcode == "constant":
            self.constant_literal(instr)
            self.expect(")", "after the constant's literal")
            return
        if self.accept(")"):
            return
        while True:
            instr.append_operand(self.operand(scope, comp))
            if self.accept(")"):
                return
            self.expect(",", "between operands")

    def operand(self, scope: dict, comp: HloComputation) -> HloInstruction:
        """`%a`, `f32[2]{0} %a`, `t#1`, or a nested instruction `f32[] constant(1)` / `abs(x)`."""
        self.ws()
        save = self.pos
        declared = self.shape() if self.at_shape() else None
        self.ws()
        pos = self.pos
        m = NAME_RE.match(self.text, pos)
        if m and not self.text.startswith("%", pos) and self._followed_by_paren(m.end()):
            self.pos = save  # a nested instruction: [shape] opcode(operands), no attributes
            return self.instruction_body("", comp, scope, allow_attributes=False)
        if declared is not None and comp is self.single and self.text.startswith((",", ")"), pos):
            return self._missing_parameter("", declared, comp, scope)
        name = self.name("an operand name")
        if name not in scope and declared is not None and comp is self.single:
            return self._missing_parameter(name, declared, comp, scope)
        if name not in scope:
            raise self.error(f"operand '{name}' is not defined in computation '{comp.name}' "
                             "(operands must be defined before use)", pos)
        instr = scope[name]
        while self.text.startswith("#", self.pos):
            self.pos += 1
            idx = self.integer("a tuple index")
            instr = self._gte(instr, idx, scope, comp, pos)
        if declared is not None and instr.shape is not None and not declared.compatible(instr.shape):
            raise self.error(f"operand '{name}' is declared {declared.to_string(False)} but is "
                             f"{instr.shape.to_string(False)}", save)
        return instr

    def _followed_by_paren(self, end: int) -> bool:
        m = WS_RE.match(self.text, end)
        p = m.end() if m else end
        return self.text.startswith("(", p)

    def _gte(self, tup: HloInstruction, idx: int, scope: dict, comp: HloComputation, pos: int):
        key = f"{tup.name}#{idx}"
        if key in scope:
            return scope[key]
        if not tup.shape.is_tuple or not 0 <= idx < len(tup.shape.tuple_shapes):
            raise self.error(f"'{key}': '{tup.name}' has no tuple element {idx}", pos)
        g = HloInstruction(comp.unique_name(f"{tup.name}.{idx}"), "get-tuple-element",
                           tup.shape.tuple_shapes[idx], [tup], {"index": idx})
        comp.add_instruction(g)
        scope[key] = g
        scope[g.name] = g
        return g

    # -- constants --------------------------------------------------------------------------------
    def constant_literal(self, instr: HloInstruction) -> None:
        self.ws()
        if instr.shape is None:
            raise self.error("a constant needs its shape written out")
        what = f"constant '{instr.name or 'anonymous'}'"
        instr.literal, instr.literal_unknown = self.literal_value(instr.shape, what)
        if instr.literal_unknown:
            self.module.warnings.append(
                f"{what} was printed as {{...}}: its values are unknown and were replaced by "
                "deterministic stand-ins")
