"""SingleDeviceCollectives ("single-device-collectives"): collectives and asynchronous copies on
the one device hlo-codegen compiles for. A module whose header asks for several devices
(replica_count x num_partitions > 1) is left alone: its collectives become collective thunks
(`hlo_codegen.collectives`).

Where it sits: hlo-codegen's prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`) runs the
pass before the fusion wrapper; the thunk emitter (`hlo_codegen.collectives.collective_thunks`)
turns what is left into copy and memset thunks with `transfers` from here. With one participant
each collective has a plain meaning, the one the reference interpreter gives it
(`hlo_common.interpreter.collectives`):

    all-reduce, all-gather, reduce-scatter,     each operand is copied to its result leaf
    all-to-all, collective-broadcast
    collective-permute                          a copy when the pairs send device 0 to itself,
                                                else zeros (nobody sends to it)
    <op>-start / <op>-done                      the start writes the result leaf that the done
                                                forwards (dataflow aliases them); the done is free
    copy-start / copy-done                      the start copies its operand to element {0}

    %ar = (f32[8], f32[]) all-reduce(%a, %b)  =>  kCopy a -> ar{0}, kCopy b -> ar{1}
    %cp = f32[4] collective-permute(%a), source_target_pairs={{0,1}}  =>  kMemzero cp

The pass refuses a collective whose group holds more than one device ("needs N devices"). One
whose result leaf keeps its operand's elements in another physical layout becomes `copy`
instructions, so the fusion wrapper gives it a transposing kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hlo_common.hlo.attributes import ReplicaGroups
from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.passes._support import global_computations, physical_order
from hlo_common.hlo.shape import Shape

DEVICE = 0  # the replica and partition id of the one device


@dataclass(frozen=True)
class Transfer:
    """One result leaf `dst` of the instruction: a copy of operand `operand` at `index`, or zeros
    when `operand` is None."""

    dst: tuple[int, ...]
    operand: int | None
    index: tuple[int, ...] = ()


# -- what each opcode writes ------------------------------------------------------------------------
def _leaves(instr: HloInstruction, operand: int, prefix: tuple[int, ...]) -> list[Transfer]:
    return [Transfer(prefix + index, operand, index)
            for index, leaf in instr.operands[operand].shape.leaf_shapes() if leaf.is_array]


def _each_operand(instr: HloInstruction, prefix: tuple[int, ...] = ()) -> list[Transfer]:
    """Operand k -> result leaf {k} (the result itself when there is one operand)."""
    if len(instr.operands) == 1:
        return _leaves(instr, 0, prefix)
    return [t for k in range(len(instr.operands)) for t in _leaves(instr, k, prefix + (k,))]


def _identity(instr: HloInstruction) -> list[Transfer]:
    return _each_operand(instr)


def _all_gather_start(instr: HloInstruction) -> list[Transfer]:
    """((operands), (results)): the results are element {1}; the older form is the result."""
    two = instr.shape.is_tuple and len(instr.shape.tuple_shapes) == 2
    return _each_operand(instr, (1,) if two else ())


def _permute(instr: HloInstruction, prefix: tuple[int, ...] = ()) -> list[Transfer]:
    if len(instr.operands) != 1:
        raise HloError(f"%{instr.name}: {instr.opcode} with {len(instr.operands)} operands (the in-place or "
                       f"combined form) is not supported by hlo-codegen{_where(instr)}")
    pairs = instr.attrs.get("source_target_pairs")
    keeps = any(s == DEVICE and t == DEVICE for s, t in (pairs.pairs if pairs is not None else ()))
    return [Transfer(t.dst, 0 if keeps else None, t.index) for t in _leaves(instr, 0, prefix)]


def _permute_start(instr: HloInstruction) -> list[Transfer]:
    """(operand, result, contexts...): the result is element {1}; the older form is the result."""
    return _permute(instr, (1,) if instr.shape.is_tuple else ())


def _copy_start(instr: HloInstruction) -> list[Transfer]:
    """(destination, source, context): the copy lands in element {0}."""
    return _leaves(instr, 0, (0,))


def _done(instr: HloInstruction) -> list[Transfer]:
    return []  # the dataflow makes a done's leaves its start's: the start wrote them


# opcode -> (does it have a group of devices, what it writes)
COLLECTIVES: dict[str, tuple[bool, Callable[[HloInstruction], list[Transfer]]]] = {
    "all-reduce": (True, _identity),
    "all-gather": (True, _identity),
    "reduce-scatter": (True, _identity),
    "all-to-all": (True, _identity),
    "collective-broadcast": (True, _identity),
    "all-reduce-start": (True, _identity),
    "all-gather-start": (True, _all_gather_start),
    "collective-permute": (False, _permute),
    "collective-permute-start": (False, _permute_start),
    "copy-start": (False, _copy_start),
    "all-reduce-done": (False, _done),
    "all-gather-done": (False, _done),
    "collective-permute-done": (False, _done),
    "copy-done": (False, _done),
}
ASYNC_STARTS = frozenset({"all-reduce-start", "all-gather-start", "collective-permute-start", "copy-start"})


def transfers(instr: HloInstruction) -> list[Transfer]:
    """The result leaves `instr` writes and where each comes from; HloError when an operand leaf
    and its result leaf hold different elements (the op would need more devices)."""
    out = COLLECTIVES[instr.opcode][1](instr)
    for t in out:
        dst = _subshape(instr, instr.shape, t.dst)
        if t.operand is None:
            continue
        src = _subshape(instr, instr.operands[t.operand].shape, t.index)
        same = dst.is_array and src.element_type is dst.element_type and list(src.dims) == list(dst.dims)
        if not same:
            raise HloError(f"%{instr.name}: {instr.opcode} result {_index_text(t.dst)} is {dst.to_string()} "
                           f"but its operand is {src.to_string()}, so it needs more than one device; "
                           f"hlo-codegen compiles for one{_where(instr)}")
    return out


def _subshape(instr: HloInstruction, shape: Shape, index: tuple[int, ...]) -> Shape:
    try:
        return shape.subshape(index)
    except (IndexError, AttributeError, TypeError) as exc:
        raise HloError(f"%{instr.name}: {instr.opcode} has no leaf {_index_text(index)} in "
                       f"{shape.to_string()}{_where(instr)}") from exc


def _index_text(index: tuple[int, ...]) -> str:
    return "{" + ",".join(map(str, index)) + "}"


def _where(instr: HloInstruction) -> str:
    return f" (in computation {instr.parent.name})" if instr.parent is not None else ""


# -- how many devices take part ---------------------------------------------------------------------
def participants(instr: HloInstruction) -> int:
    """How many devices share device 0's group: the group listing it (an empty list means every
    device of the module's `replica_count` / `num_partitions`, by XLA's collective op group mode)."""
    module = instr.parent.parent if instr.parent is not None else None
    replicas = _header_count(module, "replica_count")
    partitions = _header_count(module, "num_partitions")
    has_channel = instr.attrs.get("channel_id") is not None
    global_ids = instr.attrs.get("use_global_device_ids")
    if not has_channel:
        everyone, per_member = replicas, 1  # kCrossReplica
    elif global_ids is True:
        everyone, per_member = replicas * partitions, 1  # kFlattenedID
    elif global_ids is None and instr.opcode not in ("all-reduce", "all-reduce-start", "all-gather",
                                                       "all-gather-start", "reduce-scatter"):
        everyone, per_member = partitions, 1  # kCrossPartition
    else:
        everyone, per_member = replicas, partitions  # kCrossReplicaAndPartition
    groups = instr.attrs.get("replica_groups")
    members = [g for g in groups.groups() if g] if isinstance(groups, ReplicaGroups) else []
    if not members:
        return everyone * per_member
    for g in members:
        if DEVICE in g:
            return len(g) * per_member
    raise HloError(f"%{instr.name}: replica_groups={groups} leave out device {DEVICE}, the one hlo-codegen "
                   f"compiles for{_where(instr)}")


def _header_count(module: HloModule | None, key: str) -> int:
    text = module.header_attr(key) if module is not None else None
    try:
        return max(1, int(text)) if text is not None else 1
    except ValueError:
        return 1


# -- prepare: refuse what needs devices, rewrite layout changes as copies ---------------------------
def lower_single_device_collectives(module: HloModule, computations: list[HloComputation]) -> int:
    """Check every collective of `computations` (the global ones) runs on one device; those that
    change a leaf's layout become `copy`s. Returns how many were rewritten."""
    count = 0
    for comp in computations:
        for instr in list(comp.instructions):
            if instr.opcode == "fusion":  # e.g. a __triton_collective fusion: refuse it by its device count
                for inner in instr.fused_computation().instructions:
                    if COLLECTIVES.get(inner.opcode, (False,))[0]:
                        _check_one_device(inner)
            entry = COLLECTIVES.get(instr.opcode)
            if entry is None:
                continue
            if entry[0]:
                _check_one_device(instr)
            moves = transfers(instr)
            if all(t.operand is None or _same_bytes(instr, t) for t in moves):
                continue
            if instr.opcode in ASYNC_STARTS or any(t.index for t in moves):
                raise HloError(f"%{instr.name}: {instr.opcode} changes the layout of a tuple or asynchronous "
                               f"result, which hlo-codegen does not support{_where(instr)}")
            _rewrite_as_copies(comp, instr, moves)
            count += 1
    return count


def _check_one_device(instr: HloInstruction) -> None:
    n = participants(instr)
    if n != 1:
        raise HloError(f"%{instr.name}: {instr.opcode} needs {n} devices; hlo-codegen compiles for "
                       f"one{_where(instr)}")


def _same_bytes(instr: HloInstruction, t: Transfer) -> bool:
    src = instr.operands[t.operand].shape.subshape(t.index)
    dst = instr.shape.subshape(t.dst)
    if src.to_string() == dst.to_string():
        return True
    extras = [dict(s.layout.extras) if s.layout is not None else {} for s in (src, dst)]
    for e in extras:
        e.pop("S", None)  # the memory space does not change the bytes
    return extras[0] == extras[1] and physical_order(src) == physical_order(dst)


def _rewrite_as_copies(comp: HloComputation, instr: HloInstruction, moves: list[Transfer]) -> None:
    """`instr` -> copy(operand) with the result's layout (or a tuple of them); zeros stay zeros."""
    leaves = []
    for t in moves:
        dst = instr.shape.subshape(t.dst)
        if t.operand is None:
            zero = HloInstruction(f"{instr.name}.zero", "constant", Shape.array(dst.element_type, ()))
            zero.literal = np.zeros((), dst.element_type.np_dtype)
            comp.add_instruction(zero, before=instr)
            new = HloInstruction(instr.name, "broadcast", dst, [zero], {"dimensions": []})
        else:
            new = HloInstruction(instr.name, "copy", dst, [instr.operands[t.operand]])
        new.metadata = list(instr.metadata)
        leaves.append(comp.add_instruction(new, before=instr))
    if instr.shape.is_tuple:
        replacement = comp.add_instruction(HloInstruction(instr.name, "tuple", instr.shape, leaves),
                                           before=instr)
    else:
        (replacement,) = leaves
    name = instr.name
    comp.replace_instruction(instr, replacement, remove_dead_operands=False)
    replacement.name = name


@register_pass
@dataclass
class SingleDeviceCollectives(HloPass):
    """Collectives checked to need one device; those changing a layout become copies."""

    name = "single-device-collectives"

    def run(self, module: HloModule) -> bool:
        replicas, partitions = module_devices(module)
        if replicas * partitions > 1:  # several devices: each collective becomes a CollectiveThunk
            return False
        return lower_single_device_collectives(module, global_computations(module)) > 0


def module_devices(module: HloModule) -> tuple[int, int]:
    """(replica_count, num_partitions) of the module's header (1 where it names none)."""
    return _header_count(module, "replica_count"), _header_count(module, "num_partitions")
