"""CopyInsertion ("copy-insertion"): copies so that values sharing a buffer never clobber one another.

Where it sits: `pre-scheduling-copy-insertion`, the last pipeline before scheduling (XLA:GPU's
`pre_scheduling_copy_insertion_pipeline.cc`). Buffer assignment later puts a while's init, body
parameter, body root and result in one buffer, a conditional's branch roots and result in one
buffer, an in-place op's output (dynamic-update-slice, scatter, in-place fusions, aliasing custom
calls) in its operand's buffer and an `input_output_alias` output in its parameter's buffer; this
pass makes that safe for any schedule that respects operands and control dependencies.

As XLA's `copy_insertion.cc`, in five steps:

1. add copies everywhere interference is possible: for every loop leaf the body changes, the init
   is copied, the body parameter is copied and the body root is copied (control edge: parameter
   copy before root copy); branch roots of a conditional leaf that is a phi; the operand of every
   in-place operation; aliased parameters and outputs (control edge: parameter copy first);
2. tuple-simplifier and dce tidy the tuples those deep copies built;
3. `copy_remover.remove_unnecessary_copies` removes each copy (added or already there) whose
   removal keeps every buffer's values strictly ordered under the dependency ordering;
4. special cases: a constant or a read-only entry parameter that shares a buffer with other values
   is copied at its definition; an operand that shares a buffer with the output of an instruction
   that cannot write over it is copied; the entry's result gets copies where it returns a
   constant, a read-only parameter or one buffer at two indices;
5. tuple-simplifier and dce again.

The call graph must be flattened (`flatten-call-graph` runs in `layout assignment`); otherwise the
pass raises an HloError. It reports a change when any instruction, operand, root or control edge
of a global computation differs afterwards (XLA always reports one).

    %w = (f32[8]) while(%init), body=%b ...     %w = ... while(%init)   (%init's value is not
    %b: %p = parameter(0); %g = gte(%p), 0       used after the loop: no copy; %n overwrites the
        %n = f32[8] negate(%g)                   state in place because %g's only reader is %n)
        ROOT %t = (f32[8]) tuple(%n)
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.analysis.call_graph import (
    CallGraph, branch_computations, xla_computation_post_order, xla_instruction_post_order)
from hlo_common.analysis.dataflow import HloDataflowAnalysis, Index
from hlo_common.analysis.sharing import in_place_pairs, parse_alias_spec
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.copy_remover import must_alias_groups, remove_unnecessary_copies
from hlo_opt.passes.dce import HloDCE
from hlo_opt.passes.tuple_simplifier import TupleSimplifier


# -- deep copies (XLA's HloComputation::DeepCopyInstruction) -----------------------------------------
def _add_after(comp: HloComputation, anchor: HloInstruction, opcode: str, operands, attrs=None,
               shape=None) -> HloInstruction:
    instr = comp.add_new_instruction(opcode, operands, shape=shape, attrs=attrs, name=opcode)
    comp.instructions.pop()
    comp.instructions.insert(comp.instructions.index(anchor) + 1, instr)
    return instr


def deep_copy(instr: HloInstruction, indices: set[Index] | None,
              copies: dict[Index, HloInstruction] | None = None, anchor: HloInstruction | None = None,
              prefix: Index = ()) -> HloInstruction:
    """`instr` with the array leaves in `indices` (all array leaves when None) copied; tuples are
    rebuilt from get-tuple-elements. New instructions go right after `anchor` (default `instr`);
    `copies` receives index -> copy instruction."""
    comp = instr.parent
    anchor = anchor or instr
    shape = instr.shape
    if shape.is_array:
        if indices is not None and prefix not in indices:
            return instr
        new = _add_after(comp, anchor, "copy", [instr], shape=shape)
        if copies is not None:
            copies[prefix] = new
        return new
    if not shape.is_tuple:
        return instr  # tokens and opaque values are never copied
    elements = []
    last = anchor
    for i, sub in enumerate(shape.tuple_shapes):
        gte = _add_after(comp, last, "get-tuple-element", [instr], attrs={"index": i}, shape=sub)
        elem = deep_copy(gte, indices, copies, anchor=gte, prefix=prefix + (i,))
        last = _last_of(comp, gte, elem)
        elements.append(elem)
    return _add_after(comp, last, "tuple", elements, shape=shape)


def _last_of(comp: HloComputation, a: HloInstruction, b: HloInstruction) -> HloInstruction:
    ia, ib = comp.instructions.index(a), comp.instructions.index(b)
    return a if ia >= ib else b


def _replace_uses(old: HloInstruction, new: HloInstruction, users: list[HloInstruction]) -> None:
    for user in users:
        if user is not new:
            user.replace_operand_with(old, new)


# -- step 1: copies wherever interference is possible ----------------------------------------------
def _phi_leaves(df: HloDataflowAnalysis, instr: HloInstruction) -> set[Index]:
    out = set()
    for idx in df.array_leaves(instr):
        v = df.unique_value(instr, idx)
        if v is not None and v.is_phi and v.instruction is instr:
            out.add(idx)
    return out


def _add_copies_for_while(df: HloDataflowAnalysis, w: HloInstruction) -> None:
    indices = _phi_leaves(df, w)
    if not indices:
        return
    init = w.operands[0]
    init_copy = deep_copy(init, indices, anchor=_before(w))
    w.replace_operand_with(init, init_copy)
    body = w.attrs["body"]
    param, root = body.parameter(0), body.root
    param_users = list(param.users)
    param_copies: dict[Index, HloInstruction] = {}
    root_copies: dict[Index, HloInstruction] = {}
    param_copy = deep_copy(param, indices, param_copies)
    root_copy = deep_copy(root, indices, root_copies, anchor=body.instructions[-1])
    for idx, pc in param_copies.items():
        pc.add_control_dependency_to(root_copies[idx])
    _replace_uses(param, param_copy, param_users)
    body.root = root_copy


def _before(instr: HloInstruction) -> HloInstruction:
    """The instruction just before `instr` in its computation's list (new copies go there)."""
    comp = instr.parent
    k = comp.instructions.index(instr)
    return comp.instructions[k - 1] if k > 0 else instr


def _add_copies_for_conditional(df: HloDataflowAnalysis, cond: HloInstruction) -> None:
    indices = _phi_leaves(df, cond)
    if not indices:
        return
    for branch in branch_computations(cond):
        root = branch.root
        users = list(root.users)
        new_root = deep_copy(root, indices, anchor=branch.instructions[-1])
        _replace_uses(root, new_root, users)
        branch.root = new_root


def _add_copies_for_in_place(instr: HloInstruction) -> None:
    done: set[int] = set()
    for n, _, _ in in_place_pairs(instr):
        if n in done:
            continue
        done.add(n)
        operand = instr.operands[n]
        copy = deep_copy(operand, None, anchor=_before(instr))
        instr.replace_operand(n, copy)


def _io_aliases(module: HloModule) -> list[tuple[Index, int, Index, str]]:
    text = module.header_attr("input_output_alias")
    return parse_alias_spec(text, "input_output_alias") if text else []


def _add_copies_for_aliased_io(module: HloModule) -> None:
    aliases = _io_aliases(module)
    if not aliases:
        return
    entry = module.entry
    param_copies: dict[int, dict[Index, HloInstruction]] = {}
    for n in sorted({a[1] for a in aliases}):
        param = entry.parameter(n)
        indices = {a[2] for a in aliases if a[1] == n}
        users = list(param.users)
        copies: dict[Index, HloInstruction] = {}
        copied = deep_copy(param, _array_leaves_under(param, indices), copies)
        if entry.root is param:
            entry.root = copied
        _replace_uses(param, copied, users)
        param_copies[n] = copies
    root = entry.root
    out_copies: dict[Index, HloInstruction] = {}
    entry.root = deep_copy(root, _array_leaves_under(root, {a[0] for a in aliases}), out_copies,
                           anchor=entry.instructions[-1])
    for out_index, n, p_index, _ in aliases:
        src, dst = param_copies[n].get(p_index), out_copies.get(out_index)
        if src is not None and dst is not None:
            src.add_control_dependency_to(dst)


def _array_leaves_under(instr: HloInstruction, indices: set[Index]) -> set[Index]:
    return {idx for idx, s in instr.shape.leaf_shapes() if s.is_array
            and any(idx[:len(i)] == i for i in indices)}


def add_copies_to_resolve_interference(module: HloModule, graph: CallGraph) -> None:
    comps = [c for c in xla_computation_post_order(module) if graph.is_global(c)]
    merges = any(i.opcode in ("while", "conditional") for c in comps for i in c.instructions)
    df = HloDataflowAnalysis.run(module, ssa_form=True) if merges else None  # phis only at merges
    for comp in comps:
        for instr in xla_instruction_post_order(comp):
            if instr.opcode == "while":
                _add_copies_for_while(df, instr)
            elif instr.opcode == "conditional":
                _add_copies_for_conditional(df, instr)
            else:
                _add_copies_for_in_place(instr)
    _add_copies_for_aliased_io(module)


# -- step 4: special cases -------------------------------------------------------------------------
def add_special_case_copies(module: HloModule) -> None:
    df = HloDataflowAnalysis.run(module, ssa_form=True)
    aliased_params = {(n, p_index) for _, n, p_index, _ in _io_aliases(module)}
    to_copy: dict[HloInstruction, set[Index]] = {}
    entry = module.entry

    def read_only(v) -> bool:
        d = v.instruction
        if d.opcode == "constant":
            return True
        return (d.opcode == "parameter" and d.parent is entry
                and (d.parameter_number, v.index) not in aliased_params)

    groups = must_alias_groups(df)
    for group in groups:
        for v in group:
            if len(group) > 1 and read_only(v):
                to_copy.setdefault(v.instruction, set()).add(v.index)
            for other in group:
                if other is v:
                    continue
                pos = other.defining_position
                for use in v.uses:
                    operand = use.instruction.operands[use.operand_number]
                    if use.instruction is pos.instruction and not _may_share(operand, use, pos):
                        to_copy.setdefault(operand, set()).add(use.operand_index)
    _root_special_cases(df, groups, entry, read_only, to_copy)
    for instr in sorted(to_copy, key=lambda i: (i.parent.name, i.name)):
        users = list(instr.users)
        copied = deep_copy(instr, to_copy[instr])
        _replace_uses(instr, copied, users)
        if instr.parent.root is instr:
            instr.parent.root = copied


def _may_share(operand: HloInstruction, use, pos) -> bool:
    from hlo_common.analysis.ordering import may_write_over_operand

    return may_write_over_operand(operand, use.operand_index, pos.instruction, pos.index)


def _root_special_cases(df, groups, entry, read_only, to_copy) -> None:
    """The entry result: copy leaves that return a read-only value or repeat a buffer."""
    group_of = {v.id: k for k, g in enumerate(groups) for v in g}
    aliased_outputs = {a[0] for a in _io_aliases(df.module)}
    root = entry.root
    seen: dict[int, Index] = {}
    for idx in df.array_leaves(root):
        for v in df.value_set(root, idx):
            g = group_of[v.id]
            if g in seen:
                other = seen[g]
                target = other if idx in aliased_outputs else idx
                to_copy.setdefault(root, set()).add(target)
            else:
                seen[g] = idx
            if read_only(v):
                to_copy.setdefault(root, set()).add(idx)


# -- the pass ----------------------------------------------------------------------------------------
def _fingerprint(module: HloModule, comps: list[HloComputation]) -> list:
    out = []
    for comp in comps:
        out.append((id(comp.root), [(id(i), tuple(map(id, i.operands)),
                                     tuple(map(id, i.control_predecessors))) for i in comp.instructions]))
    return out


@register_pass
@dataclass
class CopyInsertion(HloPass):
    """Adds copies so in-place ops, loops, conditionals and aliased outputs never clobber live values."""

    name = "copy-insertion"

    def run(self, module: HloModule) -> bool:
        graph = CallGraph(module)  # raises HloError when the call graph is not flattened
        comps = [c for c in module.computations if graph.is_global(c)]
        before = _fingerprint(module, comps)
        size = sum(len(c.instructions) for c in comps)  # the adding steps only ever add
        add_copies_to_resolve_interference(module, graph)
        added = sum(len(c.instructions) for c in comps) != size
        if added:
            self._tidy(module)
        removed = 0
        if any(i.opcode == "copy" for c in comps for i in c.instructions):
            removed = remove_unnecessary_copies(module)
        size = sum(len(c.instructions) for c in comps)
        add_special_case_copies(module)
        if added or removed or sum(len(c.instructions) for c in comps) != size:
            self._tidy(module)
        return _fingerprint(module, comps) != before

    @staticmethod
    def _tidy(module: HloModule) -> None:
        TupleSimplifier().run(module)
        HloDCE().run(module)

