"""Reading instruction attributes: `, name=value` after the operands (part of the HLO parser).

Typed attributes (`attributes.ATTR_KINDS`) are read into their typed values; the attributes every
instruction may carry go to their fields (metadata in XLA's field order, sorted frontend
attributes, the sharding's canonical text, the backend config as a dict or string, control
predecessors); called computations are looked up (they must be defined earlier, as in XLA) or
read inline; anything else is kept as `RawAttr` text.
"""

from __future__ import annotations

import re

from hlo_common.hlo import attributes as A
from hlo_common.hlo.attributes import (
    OutputOperandAliasing, RawAttr, SourceTargetPairs, parse_json_object, quote_string,
)
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.parser_literals import LiteralParsing
from hlo_common.hlo.parser_scanner import IDENT_RE, normalize_space
from hlo_common.hlo.replica_groups import Mesh, ReplicaGroups
from hlo_common.hlo.sharding import HloSharding, ShardingError

_PAD_RE = re.compile(r"-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*")
_DIM_LABELS_RE = re.compile(r"[0-9a-z?]{2,}_[0-9a-z?]{2,}->[0-9a-z?]{2,}")
_COMMON_RAW = ("origin", "statistics", "parameter_replication")
_META_INDEX = {k: i for i, k in enumerate(A.METADATA_ORDER)}
_META_INTS = {"source_line", "source_end_line", "source_column", "source_end_column", "stack_frame_id"}


def _unexpected(key: str, opcode: str, allowed: frozenset[str]) -> str:
    """XLA's "unexpected attribute", with the near miss when there is one (`typ` for `type`)."""
    import difflib

    from hlo_common.hlo.parser_attr_rules import COMMON

    own = sorted(allowed - COMMON)
    close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.75)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    takes = f"{opcode} takes {', '.join(own)} and the common attributes" if own else \
        f"{opcode} takes only the common attributes"
    return f"unexpected attribute '{key}' ({takes}){hint}"


class AttributeParsing(LiteralParsing):
    """Mixin of the parser; needs `computations`, `module` and `computation(inline_name=...)`."""

    def attribute(self, instr: HloInstruction, scope: dict, seen: set[str],
                  allowed: frozenset[str] | None = None) -> None:
        self.ws()
        pos = self.pos
        m = IDENT_RE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected an attribute name, found {self.found()}")
        key = m.group(0)
        self.pos = m.end()
        if allowed is not None and key not in allowed:
            raise self.error(_unexpected(key, instr.opcode, allowed), pos)
        if key in seen:
            raise self.error(f"attribute '{key}' given twice", pos)
        seen.add(key)
        self.expect("=", f"after attribute name '{key}'")
        try:
            self._attribute_value(instr, key, scope)
        except ValueError as exc:
            raise self.error(f"bad value for attribute '{key}': {exc}", pos) from None

    def _attribute_value(self, instr: HloInstruction, key: str, scope: dict) -> None:
        if key == "metadata":
            instr.metadata = self.metadata_value()
        elif key == "frontend_attributes":
            instr.frontend_attributes = sorted(self.frontend_attributes_value())
        elif key == "sharding":
            instr.sharding = self.sharding_value()
        elif key == "backend_config":
            instr.backend_config_data = self.backend_config_value()
        elif key == "control-predecessors":
            self.control_predecessors(instr, scope)
        elif key in A.COMPUTATION_ATTR_KINDS:
            instr.attrs[key] = self.computation_ref(A.COMPUTATION_ATTR_KINDS[key], key, instr.name)
        elif key in A.ATTR_KINDS:
            instr.attrs[key] = self.typed_value(A.ATTR_KINDS[key], key)
        elif key in _COMMON_RAW:
            instr.extra_common.append((key, self.raw_value()))
        else:
            instr.attrs[key] = RawAttr(self.raw_value())

    # -- common attributes ------------------------------------------------------------------------
    def key_values(self, string_or_json: bool = False) -> list[tuple[str, str]]:
        """`{k="v" k2=3, k3={...}}` as (key, value text) pairs; strings come back quoted."""
        self.expect("{")
        out: list[tuple[str, str]] = []
        while not self.accept("}"):
            k = self.word("a key")
            self.expect("=", f"after '{k}'")
            self.ws()
            if self.text.startswith('"', self.pos):
                out.append((k, quote_string(self.string())))
            elif string_or_json:
                if not self.text.startswith("{", self.pos):
                    raise self.error(f"expected a quoted string or a JSON object for '{k}'")
                out.append((k, "{" + self.balanced() + "}"))
            else:
                out.append((k, self.raw_value()))
            self.accept(",")
        return out

    def metadata_value(self) -> list[tuple[str, str]]:
        """Metadata in XLA's field order, without empty strings and zero numbers."""
        pairs = []
        for k, v in self.key_values():
            if k in _META_INTS and not re.fullmatch(r"-?\d+", v):
                raise ValueError(f"metadata {k} must be an integer, not {v}")
            if v in ('""', "0"):
                continue
            pairs.append((k, v))
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("a metadata field is given twice")
        return sorted(pairs, key=lambda kv: (_META_INDEX.get(kv[0], len(_META_INDEX)), 0))

    def frontend_attributes_value(self) -> list[tuple[str, str]]:
        pairs = self.key_values(string_or_json=True)
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("a frontend attribute is given twice")
        return pairs

    def backend_config_value(self) -> dict | str | None:
        """A quoted string or a raw `{...}` JSON object; JSON objects become dicts."""
        self.ws()
        if self.text.startswith('"', self.pos):
            text = self.string()
        elif self.text.startswith("{", self.pos):
            text = "{" + self.balanced() + "}"
        else:
            raise self.error(f"expected a quoted string or a JSON object, found {self.found()}")
        return parse_json_object(text) or text or None

    def sharding_value(self) -> HloSharding:
        self.ws()
        start = self.pos
        if not self.text.startswith("{", self.pos):
            raise self.error(f"expected '{{' to start the sharding, found {self.found()}")
        text = "{" + normalize_space(self.balanced()) + "}"
        try:
            return HloSharding.parse(text)
        except ShardingError as exc:
            raise self.error(str(exc), start) from None

    def control_predecessors(self, instr: HloInstruction, scope: dict) -> None:
        self.expect("{")
        if self.accept("}"):
            return
        while True:
            p = self.pos
            n = self.name("a control predecessor")
            if n not in scope:
                raise self.error(f"control predecessor '{n}' is not defined before its use", p)
            scope[n].add_control_dependency_to(instr)
            if self.accept("}"):
                return
            self.expect(",", "between control predecessors")

    # -- called computations ------------------------------------------------------------------------
    def computation_ref(self, kind: str, key: str, owner: str):
        self.ws()
        if kind == "comps" or (kind == "comp_or_comps" and self._brace_list_of_names()):
            self.expect("{")
            comps = []
            if not self.accept("}"):
                while True:
                    comps.append(self._one_comp(key, owner))
                    if self.accept("}"):
                        break
                    self.expect(",", "between computations")
            return comps
        return self._one_comp(key, owner)

    def _brace_list_of_names(self) -> bool:
        return bool(re.match(r"\{\s*(?:\}|%?[A-Za-z_][\w.\-]*\s*[,}])", self.text[self.pos:self.pos + 400]))

    def _one_comp(self, key: str, owner: str) -> HloComputation:
        self.ws()
        if self.text.startswith("{", self.pos):
            return self.inline_computation(f"{owner}.{key}")
        pos = self.pos
        n = self.name("a computation name")
        if n not in self.computations:
            raise self.error(f"computation '{n}' is not defined (a called computation must be defined "
                             "before its caller, or written inline)", pos)
        if n in self.open_computations:
            raise self.error(f"{key}={n} calls computation '{n}' from inside itself; HLO has no recursion",
                             pos)
        return self.computations[n]

    # -- typed values -------------------------------------------------------------------------------
    def typed_value(self, kind: str, key: str):
        self.ws()
        reader = _READERS.get(kind)
        if reader is None:
            raise AssertionError(f"no reader for attribute kind {kind}")
        return reader(self, key)

    def int_list(self, open_: str = "{", close: str = "}", sep: str = ",") -> tuple[int, ...]:
        self.expect(open_)
        vals: list[int] = []
        if not self.accept(close):
            while True:
                vals.append(self.integer())
                if self.accept(close):
                    break
                self.expect(sep, f"or '{close}' in the list")
        return tuple(vals)

    def _bool(self, key: str) -> bool:
        v = self.word("true or false")
        if v not in ("true", "false"):
            raise ValueError(f"expected true or false, found '{v}'")
        return v == "true"

    def _pattern(self, regex: re.Pattern, what: str) -> str:
        self.ws()
        m = regex.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = m.end()
        return m.group(0)

    def _words(self, key: str) -> tuple[str, ...]:
        self.expect("{")
        vals: list[str] = []
        if not self.accept("}"):
            while True:
                vals.append(self.word("a value"))
                if self.accept("}"):
                    break
                self.expect(",")
        return tuple(vals)

    def _shapes(self, key: str) -> tuple:
        self.expect("{")
        shapes = []
        if not self.accept("}"):
            while True:
                shapes.append(self.shape())
                if self.accept("}"):
                    break
                self.expect(",", "between shapes")
        return tuple(shapes)

    def slice_spec(self, key: str = "slice") -> A.SliceSpec:
        self.expect("{")
        dims = []
        if not self.accept("}"):
            while True:
                pos = self.pos
                r = self.int_list("[", "]", ":")
                if len(r) not in (2, 3):
                    raise self.error(f"expected [start:limit] or [start:limit:stride], got {len(r)} values",
                                     pos)
                dims.append((r[0], r[1], r[2] if len(r) == 3 else 1))
                if self.accept("}"):
                    break
                self.expect(",", "between slice ranges")
        return A.SliceSpec(tuple(dims))

    def replica_groups(self, key: str = "replica_groups") -> ReplicaGroups:
        self.ws()
        if self.text.startswith("{", self.pos):
            self.expect("{")
            groups = []
            if not self.accept("}"):
                while True:
                    groups.append(self.int_list())
                    if self.accept("}"):
                        break
                    self.expect(",", "between replica groups")
            return ReplicaGroups(explicit=tuple(groups))
        if self.text.startswith("mesh[", self.pos):
            return self._mesh_groups()
        start = self.pos
        text = self._pattern(re.compile(r"\[[\d,\s]*\]\s*<=\s*\[[\d,\s]*\](?:\s*T\s*\([\d,\s]*\))?"),
                             "replica groups ({...} or [G,S]<=[dims])")
        try:
            return ReplicaGroups.parse_iota(text)
        except ValueError as exc:
            raise self.error(str(exc), start) from None

    def _mesh_groups(self) -> ReplicaGroups:
        """`mesh['x'=4,'y'=2][, device_ids=(...)] {'x', 'y':(1)2}` (see hlo.replica_groups)."""
        start = self.pos
        self.pos += len("mesh")
        self.expect("[")
        axes = []
        while not self.accept("]"):
            if axes:
                self.expect(",", "between mesh axes")
            name = self._axis_name()
            self.expect("=")
            axes.append((name, self.integer("an axis size")))
        device_ids = None
        if re.compile(r"\s*,\s*device_ids\s*=").match(self.text, self.pos):
            self.expect(",")
            self.expect("device_ids")
            self.expect("=")
            device_ids = self._mesh_device_ids()
        grouped = []
        self.expect("{", "with the grouped mesh axes")
        while not self.accept("}"):
            if grouped:
                self.expect(",", "between axis names")
            name = self._axis_name()
            if self.accept(":"):
                pre = self.int_list("(", ")")
                if len(pre) != 1:
                    raise self.error("a sub-axis is written 'name':(pre_size)size")
                grouped.append((name, pre[0], self.integer("a sub-axis size")))
            else:
                grouped.append((name, None, None))
        mesh = Mesh(tuple(axes), tuple(grouped), device_ids)
        try:
            mesh.check()
        except ValueError as exc:
            raise self.error(str(exc), start) from None
        return ReplicaGroups(mesh=mesh)

    def _mesh_device_ids(self) -> tuple:
        """`([2,2,2]T(0,2,1))` (an iota tile assignment) or `(0,2,1,3)` (the ids in mesh order)."""
        self.ws()
        if not self.text.startswith("([", self.pos):
            return ("list", self.int_list("(", ")"))
        self.expect("(")
        reshape = self.int_list("[", "]")
        perm = self.int_list("(", ")") if self.accept("T") else None
        self.expect(")")
        return ("iota", reshape, perm)

    def _axis_name(self) -> str:
        return self._pattern(re.compile(r"'([A-Za-z_][\w.\-]*)'"), "a quoted axis name")[1:-1]

    def source_target_pairs(self, key: str = "source_target_pairs") -> SourceTargetPairs:
        self.expect("{")
        pairs = []
        if not self.accept("}"):
            while True:
                pos = self.pos
                p = self.int_list()
                if len(p) != 2:
                    raise self.error("a source-target pair has two ids", pos)
                pairs.append(p)
                if self.accept("}"):
                    break
                self.expect(",", "between pairs")
        return SourceTargetPairs(tuple(pairs))

    def aliasing(self, key: str = "output_to_operand_aliasing") -> OutputOperandAliasing:
        """`{{0}: (0, {}), {1}: (1, {0})}`."""
        self.expect("{")
        entries = []
        if not self.accept("}"):
            while True:
                out_index = self.int_list()
                self.expect(":")
                self.expect("(")
                operand = self.integer("an operand number")
                self.expect(",")
                operand_index = self.int_list()
                self.expect(")")
                entries.append((out_index, operand, operand_index))
                if self.accept("}"):
                    break
                self.expect(",", "between aliasing entries")
        return OutputOperandAliasing(tuple(entries))

    def literal_attr(self, key: str) -> A.LiteralAttr:
        """`literal=s32[] 1`: a shape, then its literal."""
        shape = self.shape()
        value, unknown = self.literal_value(shape, f"attribute '{key}'")
        if unknown:
            raise self.error("an attribute literal cannot be '{...}'")
        return A.LiteralAttr(shape, value)


_READERS = {
    "int": lambda p, k: p.integer(),
    "ints": lambda p, k: p.int_list(),
    "bool": AttributeParsing._bool,
    "float": lambda p, k: p.number(),
    "string": lambda p, k: p.string(),
    "word": lambda p, k: p.word(f"a value for '{k}'"),
    "words": AttributeParsing._words,
    "slice": AttributeParsing.slice_spec,
    "padding": lambda p, k: A.PaddingConfig.parse(p._pattern(_PAD_RE, "a padding like 0_0x1_2_1")),
    "window": lambda p, k: A.Window.parse(p.balanced()),
    "dim_labels": lambda p, k: A.ConvDimensionNumbers.parse(p._pattern(_DIM_LABELS_RE,
                                                                       "dim labels like b01f_01io->b01f")),
    "shapes": AttributeParsing._shapes,
    "shape": lambda p, k: p.shape(),
    "replica_groups": AttributeParsing.replica_groups,
    "pairs": AttributeParsing.source_target_pairs,
    "aliasing": AttributeParsing.aliasing,
    "literal": AttributeParsing.literal_attr,
}
