"""ConditionalSimplifier ("simplify-conditional"): conditionals that need not branch go away, and
the ones that stay lose the results and operands nobody uses.

Runs in every `simplification` round. Per conditional (outside computations with channel ops,
and without sharding), in XLA's order:

1. results that every branch computes from the same instruction are merged (users of the later
   index read the earlier one);
2. results no get-tuple-element reads are dropped from the branches (cloned) and the shape;
3. a conditional nobody uses returns an empty tuple;
4. the conditional is removed: a single-branch conditional, or a constant branch index (pred: true
   is branch 0; s32 out of range is the last branch), becomes its branch inlined; a pred
   conditional whose two branches hold only cheap ops (elementwise, constants, broadcast, reshape,
   slice, pad, reduce, concatenate, dynamic-slice, tuples) and neither is empty becomes both branches
   inlined and a select per result leaf.

    %c = f32[4] conditional(pred[] constant(true), %a, %b), true_computation=%t, false_computation=%f
      =>  the instructions of %t, with its parameter replaced by %a

Finally, tuple elements a branch's parameter never reads are dropped from that branch (cloned) and
from the operand every calling conditional passes it. Declines: conditionals with side effects or
control dependencies (for step 4), with sharding, or calling channel instructions anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.graph import depth_first
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import make_broadcast, make_gte, make_select, make_tuple
from hlo_common.hlo.hlo_utils import NameUniquer, clone_computation, has_control_dependencies, \
    has_side_effect, replace_instruction
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.call_inliner import inline_call

CHANNEL_OPCODES = frozenset({
    "send", "recv", "send-done", "recv-done", "all-reduce", "all-reduce-start", "all-gather",
    "all-gather-start", "all-to-all", "ragged-all-to-all", "collective-permute",
    "collective-permute-start", "reduce-scatter", "collective-broadcast",
})
_CHEAP = frozenset({"broadcast", "concatenate", "dynamic-slice", "get-tuple-element", "reduce", "reshape",
                    "pad", "parameter", "slice", "tuple"})


def branches(cond: HloInstruction) -> list[HloComputation]:
    if "branch_computations" in cond.attrs:
        return list(cond.attrs["branch_computations"])
    return [cond.attrs["true_computation"], cond.attrs["false_computation"]]


def set_branch(cond: HloInstruction, k: int, comp: HloComputation) -> None:
    if "branch_computations" in cond.attrs:
        comps = list(cond.attrs["branch_computations"])
        comps[k] = comp
        cond.attrs["branch_computations"] = comps
    else:
        cond.attrs["true_computation" if k == 0 else "false_computation"] = comp


def calls_channel_instructions(instr: HloInstruction) -> bool:
    def callees(comp: HloComputation) -> list[HloComputation]:
        return [c for i in comp.instructions for c in i.called_computations()]

    return any(i.opcode in CHANNEL_OPCODES
               for comp in depth_first(instr.called_computations(), callees) for i in comp.instructions)


def _gte_users_only(cond: HloInstruction) -> bool:
    return bool(cond.users) and not cond.is_root and cond.shape.is_tuple \
        and all(u.opcode == "get-tuple-element" for u in cond.users)


def merge_duplicate_tuple_elements(cond: HloInstruction) -> bool:
    """Result j equals an earlier result i in every branch: users of j read i."""
    if not _gte_users_only(cond) or any(b.root.opcode != "tuple" for b in branches(cond)):
        return False
    first: dict[tuple[int, ...], int] = {}
    changed = False
    for i in range(len(cond.shape.tuple_shapes)):
        key = tuple(id(b.root.operands[i]) for b in branches(cond))
        earlier = first.setdefault(key, i)
        if earlier != i:
            for user in cond.users:
                if user.attrs["index"] == i:
                    user.attrs["index"] = earlier
                    changed = True
    return changed


def remove_unused_tuple_elements(cond: HloInstruction, uniquer: NameUniquer) -> bool:
    if not _gte_users_only(cond):
        return False
    old = cond.shape
    used = sorted({u.attrs["index"] for u in cond.users})
    if len(used) == len(old.tuple_shapes):
        return False
    if any(not b.root.shape.is_tuple or not b.root.shape.compatible(old) for b in branches(cond)):
        return False
    module = cond.parent.parent
    for k, branch in enumerate(branches(cond)):
        clone = clone_computation(branch, module, uniquer)
        set_branch(cond, k, clone)
        old_root = clone.root
        clone.root = make_tuple(clone, [make_gte(old_root, i) for i in used])
    cond.shape = Shape.tuple_of([old.tuple_shapes[i] for i in used])
    for user in cond.users:
        user.attrs["index"] = used.index(user.attrs["index"])
    return True


def replace_root_with_empty_tuple_if_no_users(cond: HloInstruction, uniquer: NameUniquer) -> bool:
    empty = Shape.tuple_of([])
    if cond.users or cond.is_root or cond.shape.compatible(empty):
        return False
    module = cond.parent.parent
    for k, branch in enumerate(branches(cond)):
        clone = clone_computation(branch, module, uniquer)
        set_branch(cond, k, clone)
        clone.root = make_tuple(clone, [])
    cond.shape = empty
    return True


def _inline_branch(cond: HloInstruction, k: int, uniquer: NameUniquer) -> HloInstruction:
    """A call of branch k on its operand, placed before `cond` (not yet inlined)."""
    comp = cond.parent
    call = HloInstruction(comp.unique_name("call"), "call", cond.shape, [cond.operands[1 + k]],
                          {"to_apply": branches(cond)[k]})
    call.metadata = list(cond.metadata)
    call.frontend_attributes = list(cond.frontend_attributes)
    comp.add_instruction(call)
    return call


def _select_tree(cond: HloInstruction, t: HloInstruction, f: HloInstruction) -> HloInstruction:
    pred = cond.operands[0]
    if f.shape.is_token:
        return cond.parent.add_new_instruction("after-all", [t, f])
    if f.shape.is_array:
        mask = pred if f.shape.rank == 0 else make_broadcast(pred, f.shape.dims)
        return make_select(mask, t, f)
    return make_tuple(cond.parent, [_select_tree(cond, make_gte(t, i), make_gte(f, i))
                                    for i in range(len(f.shape.tuple_shapes))])


def _is_expensive(instr: HloInstruction) -> bool:
    """XLA's instruction_is_expensive in TryRemoveConditional: not one of the cheap data-movement
    ops and not elementwise; a constant counts as elementwise there (HloConstantInstruction)."""
    from hlo_common.hlo.opcodes import is_elementwise

    return instr.opcode not in _CHEAP and instr.opcode != "constant" and not is_elementwise(instr.opcode)


def _is_empty_with_array_root(comp: HloComputation) -> bool:
    return all(i.opcode in ("tuple", "get-tuple-element", "parameter") for i in comp.instructions) \
        and any(s.is_array for _, s in comp.root.shape.leaf_shapes())


def constant_branch_index(cond: HloInstruction) -> int | None:
    selector = cond.operands[0]
    if selector.opcode != "constant" or selector.literal_unknown:
        return None
    value = selector.literal.item()
    if selector.shape.element_type.is_pred:
        return 0 if value else 1
    n = len(branches(cond))
    return int(value) if 0 <= int(value) < n else n - 1


def try_remove_conditional(cond: HloInstruction, uniquer: NameUniquer) -> bool:
    if has_control_dependencies(cond) or has_side_effect(cond):
        return False
    comp = cond.parent
    index = 0 if len(branches(cond)) == 1 else constant_branch_index(cond)
    if index is not None:
        call = _inline_branch(cond, index, uniquer)
        replace_instruction(cond, call, preserve_sharding=False)
        inline_call(call, uniquer)
        return True
    bs = branches(cond)
    if len(bs) != 2 or not cond.operands[0].shape.element_type.is_pred \
            or any(_is_expensive(i) for b in bs for i in b.instructions):
        return False
    if any(_is_empty_with_array_root(b) for b in bs):
        return False
    t_call, f_call = _inline_branch(cond, 0, uniquer), _inline_branch(cond, 1, uniquer)
    selected = _select_tree(cond, t_call, f_call)
    replace_instruction(cond, selected, preserve_sharding=False)
    inline_call(f_call, uniquer)
    inline_call(t_call, uniquer)
    return True


def try_remove_unused_operands(branch: HloComputation, callers: list[HloInstruction],
                               uniquer: NameUniquer) -> bool:
    """Drop the tuple elements `branch`'s parameter never reads, from it and its callers' operands."""
    param = branch.parameters[0]
    if param.is_root or not param.shape.is_tuple or any(u.opcode != "get-tuple-element" for u in param.users):
        return False
    keep = sorted({u.attrs["index"] for u in param.users})
    old_shape = param.shape
    if len(keep) == len(old_shape.tuple_shapes):
        return False
    clone = clone_computation(branch, branch.parent, uniquer)
    new_param = clone.parameters[0]
    new_param.shape = Shape.tuple_of([old_shape.tuple_shapes[i] for i in keep])
    for gte in new_param.users:
        gte.attrs["index"] = keep.index(gte.attrs["index"])
    for cond in callers:
        if cond.sharding is not None:
            continue
        for k, b in enumerate(branches(cond)):
            if b is not branch:
                continue
            set_branch(cond, k, clone)
            operand = cond.operands[1 + k]
            new_operand = make_tuple(cond.parent, [make_gte(operand, i) for i in keep])
            cond.replace_operand(1 + k, new_operand)
    return True


@register_pass
@dataclass
class ConditionalSimplifier(HloPass):
    """Inlines conditionals with a known or single branch; trims unused results and operands."""

    name = "simplify-conditional"

    def run(self, module: HloModule) -> bool:
        conds = [i for c in module.computations for i in c.post_order()
                 if i.opcode == "conditional" and i.sharding is None and not calls_channel_instructions(i)]
        if not conds:
            return False
        uniquer = NameUniquer.for_module(module)
        changed = False
        removed: set[int] = set()
        for cond in conds:
            changed |= merge_duplicate_tuple_elements(cond)
            changed |= remove_unused_tuple_elements(cond, uniquer)
            changed |= replace_root_with_empty_tuple_if_no_users(cond, uniquer)
            if try_remove_conditional(cond, uniquer):
                removed.add(id(cond))
                changed = True
        callers: dict[int, list[HloInstruction]] = {}
        order: list[HloComputation] = []
        for cond in conds:
            if id(cond) in removed:
                continue
            for b in branches(cond):
                if id(b) not in callers:
                    order.append(b)
                    callers[id(b)] = []
                if cond not in callers[id(b)]:
                    callers[id(b)].append(cond)
        for branch in order:
            changed |= try_remove_unused_operands(branch, callers[id(branch)], uniquer)
        if changed:
            module.remove_unreachable_computations()
        return changed
