"""HloCSE ("cse"): common subexpression elimination.

Runs at the end of every `simplification` round (layout-insensitive), after layout assignment
(layout-sensitive) and twice in the `fusion` pipeline, there only inside fusion computations,
where it merges ops that priority fusion duplicated into the same fusion.

    %c1 = f32[] constant(2)           %c1 = f32[] constant(2)
    %c2 = f32[] constant(2)     =>    %m1 = f32[4] multiply(%x, %b1) ... every use of %m2 and
    %m1 = f32[4] multiply(%x, %b1)                                     %c2 reads %m1 / %c1

Two instructions are merged when they are identical: same opcode, same operands (in any order
for commutative binary ops; equal iotas count as the same operand), same shape (including the
layout when `is_layout_sensitive`), same attributes, same sharding and backend config, and
structurally equal called computations; metadata is ignored. Identical constants (same shape and
bit-identical value) are merged first. Declines: parameters and other zero-operand instructions
(except replica-id / partition-id), side-effecting instructions, instructions with control
dependencies, and `{...}` constants whose values are unknown. The first instruction in post
order survives, so the result does not depend on hashing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hlo_common.hlo.ir import COMPUTATION_ATTRS, HloComputation, HloInstruction, HloModule
from hlo_common.hlo.opcodes import COMMUTATIVE
from hlo_common.hlo.hlo_utils import (
    computation_callers,
    fusion_instruction_of,
    has_control_dependencies,
    has_side_effect,
    remove_instruction_and_unused_operands,
)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

_ZERO_OPERAND_CSE = frozenset({"replica-id", "partition-id"})


def literal_key(value: Any) -> Any:
    """A hashable, bit-exact key for a constant's value (so -0.0 != 0.0 and NaN payloads count)."""
    if isinstance(value, tuple):
        return tuple(literal_key(v) for v in value)
    arr = np.asarray(value)
    return (str(arr.dtype), arr.shape, arr.tobytes())


def shape_key(instr: HloInstruction, layout_sensitive: bool):
    return instr.shape if layout_sensitive else instr.shape.without_layout()


class _Keys:
    """Structural keys of instructions and computations for one pass run."""

    def __init__(self, layout_sensitive: bool):
        self.layout_sensitive = layout_sensitive
        self.comp_keys: dict[int, tuple] = {}
        self.shapes: dict[int, tuple] = {}  # id(shape) -> (shape, its key): kept alive, so ids hold

    def shape(self, instr: HloInstruction):
        if self.layout_sensitive:
            return instr.shape
        entry = self.shapes.get(id(instr.shape))
        if entry is None:
            entry = self.shapes[id(instr.shape)] = (instr.shape, instr.shape.without_layout())
        return entry[1]

    def attrs(self, instr: HloInstruction) -> tuple:
        plain = tuple(sorted(((k, v) for k, v in instr.attrs.items() if k not in COMPUTATION_ATTRS),
                             key=lambda kv: kv[0]))
        called = tuple((k, self.computation(c)) for k in COMPUTATION_ATTRS
                       for c in _as_list(instr.attrs.get(k)))
        common = (instr.sharding, instr.backend_config, tuple(instr.frontend_attributes),
                  tuple(instr.extra_common), instr.parameter_number)
        literal = None
        if instr.opcode == "constant":  # a `{...}` constant's value is unknown: equal to nothing
            literal = ("unknown", instr.unique_id) if instr.literal_unknown else literal_key(instr.literal)
        return plain, called, common, literal

    def instruction(self, instr: HloInstruction, operand_keys: list) -> tuple:
        return self.graph(instr, operand_keys) + (self.attrs(instr),)

    def graph(self, instr: HloInstruction, operand_keys: list) -> tuple:
        """The cheap part of `instruction`'s key: opcode, shape and operands (no attributes)."""
        if instr.opcode in COMMUTATIVE and len(operand_keys) == 2:
            operand_keys = sorted(operand_keys, key=str)
        return (instr.opcode, self.shape(instr), tuple(operand_keys))

    def computation(self, comp: HloComputation) -> tuple:
        """Equal keys <=> the computations are structurally identical (names aside)."""
        key = self.comp_keys.get(id(comp))
        if key is None:
            order = comp.post_order()
            pos = {id(i): k for k, i in enumerate(order)}
            body = tuple(self.instruction(i, [("#", pos[id(o)]) for o in i.operands]) for i in order)
            key = (body, pos[id(comp.root)], comp.execution_thread)
            self.comp_keys[id(comp)] = key
        return key

    def forget(self, comp: HloComputation) -> None:
        self.comp_keys.pop(id(comp), None)


def _as_list(v) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def _operand_key(op: HloInstruction, keys: _Keys):
    # Two iotas of the same shape and dimension are interchangeable operands (XLA's eq_instructions).
    if op.opcode == "iota":
        return ("iota", keys.shape(op), op.attrs.get("iota_dimension"))
    return ("id", op.unique_id)


def combine_constants(comp: HloComputation, keys: _Keys) -> bool:
    seen: dict[tuple, HloInstruction] = {}
    changed = False
    for instr in list(comp.instructions):
        if instr.opcode != "constant" or instr.literal_unknown or has_control_dependencies(instr):
            continue
        key = keys.instruction(instr, [])
        first = seen.setdefault(key, instr)
        if first is not instr:
            instr.replace_all_uses_with(first)
            comp.remove_instruction(instr)
            changed = True
    return changed


def cse_computation(comp: HloComputation, keys: _Keys) -> bool:
    """Instructions are bucketed by opcode, shape and operands; attribute keys (the costly part)
    are built only for instructions that share a bucket, and compared in post order."""
    changed = combine_constants(comp, keys)
    buckets: dict[tuple, list[list]] = {}  # graph key -> [[instruction, attribute key or None]]
    for instr in comp.post_order():
        if instr.parent is not comp:
            continue
        if not instr.operands and instr.opcode not in _ZERO_OPERAND_CSE:
            continue
        if has_side_effect(instr) or has_control_dependencies(instr):
            continue
        graph = keys.graph(instr, [_operand_key(o, keys) for o in instr.operands])
        bucket = buckets.get(graph)
        if bucket is None:
            buckets[graph] = [[instr, None]]
            continue
        attrs = keys.attrs(instr)
        first = _first_equal(bucket, attrs, keys)
        if first is None:
            bucket.append([instr, attrs])
            continue
        instr.replace_all_uses_with(first)
        remove_instruction_and_unused_operands(comp, instr)
        changed = True
    if changed:
        keys.forget(comp)
    return changed


def _first_equal(bucket: list[list], attrs: tuple, keys: _Keys) -> HloInstruction | None:
    """The earliest instruction of `bucket` whose attribute key equals `attrs` (keys filled in
    lazily: a bucket's first member needs one only once a second arrives)."""
    for entry in bucket:
        if entry[1] is None:
            entry[1] = keys.attrs(entry[0])
        if entry[1] == attrs:
            return entry[0]
    return None


@register_pass
@dataclass
class HloCSE(HloPass):
    """Merges identical instructions and identical constants within each computation."""

    name = "cse"
    is_layout_sensitive: bool = True
    only_fusion_computations: bool = False

    def run(self, module: HloModule) -> bool:
        keys = _Keys(self.is_layout_sensitive)
        wanted: Callable[[HloComputation], bool] = lambda c: True  # noqa: E731
        if self.only_fusion_computations:
            callers = computation_callers(module)
            wanted = lambda c: fusion_instruction_of(c, callers) is not None  # noqa: E731
        changed = False
        # Callees first: a caller's key for a called computation is then final.
        for comp in module.computation_post_order():
            if wanted(comp):
                changed |= cse_computation(comp, keys)
        return changed
