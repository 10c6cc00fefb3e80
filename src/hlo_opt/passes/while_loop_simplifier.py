"""WhileLoopSimplifier ("simplify-while-loops"): loops lose the state they do not need, and loops
that run zero times or once disappear.

Runs in every `simplification` round. For each while loop whose condition and body have no other
caller, the first of these that applies (XLA's order):

1. repeated state: elements the body passes through unchanged and that start from the same
   init value are merged into one;
2. dead state: elements not used after the loop that feed no other element, no side effect and
   not the condition (alone, or as a group of elements that only feed each other), are removed;
3. constant state: elements that are the same constant in the init tuple and at the body's root
   are removed, their reads becoming the constant;
4. (no send/recv inside) scalar elements passed through unchanged with a constant init value are
   replaced by that constant inside the loop, and then a loop with a known trip count of 0 is
   replaced by its init value, one with a trip count of 1 by its body inlined (unless a called
   computation has a side effect or the frontend attribute
   `skip-simplify-while-loops_trip-count-one` is "true");
5. (no kDomain inside) two or more integer induction variables `x += c` of one type are merged:
   each becomes init + trip_counter * c, with the existing `i += 1` from 0 or a new counter.

    %w = (s32[], f32[4]) while((s32[], f32[4]) tuple(s32[] constant(0), %x)), condition=%c, body=%b
    (%c: i < 1; %b: i += 1, v = v * 2)    =>   the body inlined on the init tuple

Declines: loops without a tuple-shaped state or a tuple root in the body (for 1-3), parameters read
other than through get-tuple-element, loops with control dependencies, loops whose condition has
a side effect (for 4). Not done (XLA does them): flattening nested state tuples and the
dynamic-update-slice variant of repeated state. HloDCE runs after any change.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.hlo_utils import (
    NameUniquer, computation_callers, computation_has_side_effect, has_control_dependencies, has_side_effect,
    replace_instruction,
)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.call_inliner import inline_call
from hlo_opt.passes.dce import HloDCE
from hlo_opt.while_loop_analysis import compute_while_loop_trip_count
from hlo_opt.while_util import merge_induction_variables, remove_tuple_indices

_SEND_RECV = frozenset({"send", "send-done", "recv", "recv-done"})
SKIP_TRIP_COUNT_ONE = "skip-simplify-while-loops_trip-count-one"
_INDUCTION_TYPES = ("s8", "u8", "s32", "u32", "s64", "u64")


def _loop_parts(w: HloInstruction) -> tuple[HloInstruction, HloComputation, HloComputation]:
    return w.operands[0], w.attrs["condition"], w.attrs["body"]


def params_read_by_gte_only(w: HloInstruction) -> bool:
    _, cond, body = _loop_parts(w)
    return all(u.opcode == "get-tuple-element" for c in (cond, body) for u in c.parameters[0].users)


def _is_pass_through(body: HloComputation, index: int) -> bool:
    out = body.root.operands[index]
    return out.opcode == "get-tuple-element" and out.operands[0] is body.parameters[0] \
        and out.attrs["index"] == index


def _tuple_state(w: HloInstruction) -> bool:
    init, _, body = _loop_parts(w)
    return init.shape.is_tuple and body.root.opcode == "tuple" and not has_control_dependencies(w)


def try_remove_repeated_indices(w: HloInstruction, uniquer: NameUniquer) -> bool:
    init, _, body = _loop_parts(w)
    if not _tuple_state(w) or init.opcode != "tuple" or not params_read_by_gte_only(w):
        return False
    first: dict[int, int] = {}
    alias: dict[int, int] = {}
    for i, elem in enumerate(init.operands):
        if _is_pass_through(body, i):
            keeper = first.setdefault(id(elem), i)
            if keeper != i:
                alias[i] = keeper
    if not alias:
        return False
    keep = [i for i in range(len(init.operands)) if i not in alias]
    remove_tuple_indices(w, keep, dict(alias), uniquer)
    return True


def _dependency_masks(w: HloInstruction, candidate_bit: dict[int, int]):
    """Per instruction of body and condition, the bit mask of candidate inputs it reads (one
    iteration), plus a union-find parent map joining instructions connected by data flow."""
    _, cond, body = _loop_parts(w)
    untracked = {id(body.parameters[0]), id(cond.parameters[0]), id(body.root)}
    masks: dict[int, int] = {}
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while x != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb

    for comp in (body, cond):
        param = comp.parameters[0]
        for instr in comp.post_order():
            if id(instr) in untracked:
                continue
            if instr.opcode == "get-tuple-element" and instr.operands[0] is param:
                index = instr.attrs["index"]
                masks[id(instr)] = 1 << candidate_bit[index] if index in candidate_bit else 0
                out = body.root.operands[index]
                if out is not instr:
                    union(id(out), id(instr))
                continue
            mask = 0
            for op in instr.operands:
                if id(op) not in untracked:
                    mask |= masks.get(id(op), 0)
                    union(id(op), id(instr))
            masks[id(instr)] = mask
    return masks, find


def dead_state_indices(w: HloInstruction) -> set[int]:
    """XLA's TryRemoveDeadWhileParams analysis: the indices that can go."""
    _, cond, body = _loop_parts(w)
    n = len(w.shape.tuple_shapes)
    used_after = set(range(n)) if w.is_root or any(u.opcode != "get-tuple-element" for u in w.users) \
        else {u.attrs["index"] for u in w.users}
    candidates = [i for i in range(n) if i not in used_after or _is_pass_through(body, i)]
    bit = {i: k for k, i in enumerate(candidates)}
    masks, find = _dependency_masks(w, bit)
    sinks = [i for c in (body, cond) for i in c.instructions if has_side_effect(i)] + [cond.root]
    side = 0
    for s in sinks:
        side |= masks.get(id(s), 0)
    others = 0
    for i in range(n):
        mask = masks.get(id(body.root.operands[i]), 0)
        others |= mask & ~(1 << bit[i]) if i in bit else mask
    removed = {i for i in range(n) if i not in used_after
               and not (others >> bit[i]) & 1 and not (side >> bit[i]) & 1}
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(id(body.root.operands[i])), []).append(i)
    for comp in (body, cond):
        for gte in comp.parameters[0].users:
            groups.setdefault(find(id(gte)), []).append(gte.attrs["index"])
    for members in groups.values():
        if all(i in bit and not (side >> bit[i]) & 1 for i in members):
            removed.update(members)
    return removed


def try_remove_dead_state(w: HloInstruction, uniquer: NameUniquer) -> bool:
    if not _tuple_state(w) or not w.shape.tuple_shapes or not params_read_by_gte_only(w):
        return False
    removed = dead_state_indices(w)
    if not removed:
        return False
    keep = [i for i in range(len(w.shape.tuple_shapes)) if i not in removed]
    remove_tuple_indices(w, keep, {i: None for i in removed}, uniquer)
    return True


def try_remove_constant_state(w: HloInstruction, uniquer: NameUniquer) -> bool:
    init, _, body = _loop_parts(w)
    if init.opcode != "tuple" or body.root.opcode != "tuple" or has_control_dependencies(w):
        return False
    constant = {}
    for i, (a, b) in enumerate(zip(init.operands, body.root.operands)):
        if a.opcode == b.opcode == "constant" and not a.literal_unknown and not b.literal_unknown \
                and a.shape.compatible(b.shape) and _same_literal(a.literal, b.literal):
            constant[i] = a
    if not constant:
        return False
    if len(constant) == len(init.operands):
        replace_instruction(w, init, preserve_sharding=False)
        return True
    keep = [i for i in range(len(init.operands)) if i not in constant]
    remove_tuple_indices(w, keep, dict(constant), uniquer)
    return True


def _same_literal(a, b) -> bool:
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def try_propagate_constant(w: HloInstruction) -> bool:
    init, cond, body = _loop_parts(w)
    if init.opcode != "tuple" or body.root.opcode != "tuple":
        return False
    constants = {i: init.operands[i] for i in range(len(init.operands))
                 if _is_pass_through(body, i) and body.root.operands[i].shape.rank == 0
                 and init.operands[i].opcode == "constant" and not init.operands[i].literal_unknown}
    changed = False
    for comp in (cond, body):
        for gte in list(comp.parameters[0].users):
            value = constants.get(gte.attrs.get("index")) if gte.opcode == "get-tuple-element" else None
            if value is None or not (gte.users or gte.is_root):
                continue
            const = comp.add_new_instruction("constant", [], value.shape, literal=value.literal,
                                             name=value.name)
            gte.replace_all_uses_with(const)
            changed = True
    return changed


def try_remove_while_loop(w: HloInstruction, uniquer: NameUniquer) -> bool:
    init, cond, body = _loop_parts(w)
    if has_control_dependencies(w) or computation_has_side_effect(cond):
        return False
    trips = compute_while_loop_trip_count(w, max_brute_force_iters=1)
    if trips == 0:
        replace_instruction(w, init, preserve_sharding=False)
        return True
    skip = dict(w.frontend_attributes).get(SKIP_TRIP_COUNT_ONE, "").strip('"') == "true"
    if trips != 1 or skip or computation_has_side_effect(body) or computation_has_side_effect(cond):
        return False
    comp = w.parent
    call = HloInstruction(comp.unique_name("call"), "call", w.shape, [init], {"to_apply": body})
    call.frontend_attributes = list(w.frontend_attributes)
    comp.add_instruction(call)
    replace_instruction(w, call, preserve_sharding=False)
    inline_call(call, uniquer)
    return True


def _contains_send_recv(comp: HloComputation) -> bool:
    return any(i.opcode in _SEND_RECV or any(_contains_send_recv(c) for c in i.called_computations())
               for i in comp.instructions)


def simplify_loop(w: HloInstruction, uniquer: NameUniquer) -> bool:
    for rewrite in (try_remove_repeated_indices, try_remove_dead_state, try_remove_constant_state):
        if rewrite(w, uniquer):
            return True
    _, cond, body = _loop_parts(w)
    if _contains_send_recv(body) or _contains_send_recv(cond):
        return False
    changed = try_propagate_constant(w)
    if try_remove_while_loop(w, uniquer):
        return True
    if any(i.opcode == "domain" for c in (body, cond) for i in c.instructions):
        return changed
    for type_name in _INDUCTION_TYPES:  # S16/U16 are left out, as in XLA
        merged = merge_induction_variables(w, type_name, uniquer)
        if merged is not None:
            w, changed = merged, True
    return changed


@register_pass
@dataclass
class WhileLoopSimplifier(HloPass):
    """Removes unneeded loop state and loops that run zero times or once."""

    name = "simplify-while-loops"

    def run(self, module: HloModule) -> bool:
        loops = [i for c in module.computations for i in c.instructions if i.opcode == "while"]
        if not loops:
            return False
        callers = computation_callers(module)
        uniquer = NameUniquer.for_module(module)
        changed = False
        for w in loops:
            if w.parent is None:
                continue
            if any(len(callers.get(id(w.attrs[k]), [])) > 1 for k in ("body", "condition")):
                continue
            changed |= simplify_loop(w, uniquer)
        if changed:
            HloDCE().run(module)
        return changed
