"""Copy insertion: add `copy` instructions so that colocated values never clobber each other.

A simplified form of XLA's `CopyInsertion` (`xla/service/copy_insertion.cc`) for one given
instruction order: hlo-codegen runs it on modules that did not come through hlo-opt (whose
`copy-insertion` pass is the full, order-independent algorithm), and buffer assignment uses
`find_needed_copies` to refuse a module that still needs copies in the order it will run.
`insert_copies(module)` mutates the module; `assign_buffers` never does.

A while loop keeps its state in one buffer per leaf (init, body parameter, body root, condition
parameter and result are colocated). For each leaf the body *writes* (its root is not the
parameter passed through):

- the init value is copied when it is read-only (a constant or a parameter), defined in another
  computation, used after the loop, live out, or fed to two leaves;
- the body root value is copied when it is not a value the body defines itself (a parameter
  element from another index, a constant), feeds two leaves, or is written while the old state
  is still read later in the body. The copy gets control predecessors on those readers, so any
  schedule runs it after them.

Each branch root leaf of a conditional is copied unless the branch defines that value itself.
An output aliased to a parameter by `input_output_alias` is copied unless writing it can wait
for the parameter's last reader. With `in_place=True` (the default of `insert_copies`), the
operand of a dynamic-update-slice / scatter / in-place fusion that cannot be updated in place is
copied first, so every such op runs in place.

    >>> insert_copies(module)                            # doctest: +SKIP
    2
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape

from hlo_common.analysis import call_graph as cg
from hlo_common.analysis.dataflow import HloDataflowAnalysis, Index
from hlo_common.analysis.live_range import HloLiveRange
from hlo_common.analysis.sharing import can_share_operand_buffer_with_user, in_place_pairs


@dataclass
class NeededCopy:
    """Copy leaf `index` of `instruction`'s operand `operand_number` (the operand is replaced)."""

    user: HloInstruction
    operand_number: int
    index: Index
    reason: str
    after: list[HloInstruction] = field(default_factory=list)  # must run after these readers


def _leaf_set(df: HloDataflowAnalysis, instr: HloInstruction, index: Index):
    return frozenset(v.id for v in df.value_set(instr, index))


def _trace_back(instr: HloInstruction, index: Index) -> tuple[HloInstruction, Index]:
    """Follow tuple / get-tuple-element from a position back to where its value comes from."""
    for _ in range(10_000):
        if instr.opcode == "tuple" and index:
            instr, index = instr.operands[index[0]], index[1:]
        elif instr.opcode == "get-tuple-element":
            instr, index = instr.operands[0], (instr.attrs["index"],) + index
        else:
            return instr, index
    return instr, index


def _readers(df: HloDataflowAnalysis, src: HloInstruction, src_index: Index, skip: HloInstruction):
    """(reader, operand number, index) of instructions that read the state held at (src, src_index):
    the uses of its values made through a position whose value set is that state's whole set
    (also through calls and nested control flow; over-approximate when dataflow merged states)."""
    state = _leaf_set(df, src, src_index)
    out, seen = [], set()
    for v in df.value_set(src, src_index):
        for use in v.uses:
            reader = use.instruction
            if (reader is skip and skip.opcode == "tuple") or (id(reader), use.operand_number,
                                                                  use.operand_index) in seen:
                continue
            if _leaf_set(df, reader.operands[use.operand_number], use.operand_index) == state:
                seen.add((id(reader), use.operand_number, use.operand_index))
                out.append((reader, use.operand_number, use.operand_index))
    return out


def _reads(user: HloInstruction, index: Index) -> bool:
    from hlo_common.analysis.dataflow import may_use_operand_value
    return may_use_operand_value(user, index)


def _handoff_blockers(df, lr, state, writer, writer_index, root) -> list[HloInstruction]:
    """Readers of the old state that run after `writer` overwrites it (or at it, not in place)."""
    t = lr.time[writer]
    late = []
    for reader, k, idx in _readers(df, state[0], state[1], root):
        tr = lr.time.get(reader, -1)
        if tr > t or (tr == t and not (reader is writer and can_share_operand_buffer_with_user(
                reader.operands[k], idx, writer, writer_index))):
            late.append(_in_computation(df, reader, root.parent))
    return [r for r in late if r is not None]


def _in_computation(df, instr: HloInstruction, comp: HloComputation) -> HloInstruction | None:
    """`instr`, or the call/while/conditional in `comp` that (transitively) runs it."""
    for _ in range(1000):
        if instr.parent is comp:
            return instr
        site = df.call_site(instr.parent)
        if site is None:
            return None
        instr = site[0]
    return None


def _own_value(df, instr, index, comp):
    """The single value at (instr, index) if `comp` defines it and it is writable, else None."""
    vs = df.value_set(instr, index)
    if len(vs) != 1:
        return None
    v = vs[0]
    if v.instruction.parent is not comp or v.instruction.opcode in ("constant", "parameter"):
        return None
    return v


def _root_copies(df, lr, root, leaves, comp, state_of) -> list[NeededCopy]:
    """Copies for the leaves of a while body / branch / entry root that must own their value.
    `state_of(k)` is the position whose buffer leaf k overwrites (None: a fresh buffer)."""
    out, seen = [], set()
    for k in leaves:
        state = state_of(k)
        if state is not None and _trace_back(root, k) == state:
            continue  # passes its own state through unchanged
        x = _own_value(df, root, k, comp)
        if x is None or x.id in seen:
            why = "is not a value the computation defines" if x is None else "feeds two outputs"
            out.append(_copy_at(root, k, f"%{root.name}{list(k)} of {comp.name} {why}"))
            continue
        seen.add(x.id)
        if state is not None:
            late = _handoff_blockers(df, lr, state, x.instruction, x.index, root)
            if late:
                c = _copy_at(root, k, f"%{x.instruction.name} overwrites state {list(k)} of {comp.name} "
                                      f"before %{late[0].name} reads it")
                c.after = late
                out.append(c)
    return out


def _copy_at(tuple_like: HloInstruction, index: Index, reason: str) -> NeededCopy:
    """A copy of leaf `index` of `tuple_like`'s output, expressed on the instruction itself."""
    return NeededCopy(tuple_like, -1, index, reason)


def _while_copies(df: HloDataflowAnalysis, lr: HloLiveRange, w: HloInstruction) -> list[NeededCopy]:
    body, init = w.attrs["body"], w.operands[0]
    param = body.parameter(0)
    leaves = df.array_leaves(w)
    written = [k for k in leaves if _trace_back(body.root, k) != (param, k)]
    out = _root_copies(df, lr, body.root, written, body, lambda k: (param, k))
    t_w = lr.time[w]
    seen: set[int] = set()
    for k in written:
        vs = df.value_set(init, k)
        reason = None
        for v in vs:
            if v.instruction.opcode in ("constant", "parameter") or v.instruction.parent is not w.parent:
                reason = f"init %{v.instruction.name} is read-only or from another computation"
            elif _directly_live_out(df, v, w) or v.id in seen:
                reason = f"init %{v.instruction.name} is live out or feeds two loop leaves"
            elif any(_later_direct_use(df, lr, u, w, t_w) for u in v.uses):
                reason = f"init %{v.instruction.name} is used after %{w.name}"
            seen.add(v.id)
        if reason:
            out.append(NeededCopy(w, 0, k, reason))
    return out


def _carried(df, w) -> set[int]:
    """Ids of the values a while's result carries out of its body."""
    return {v.id for idx in df.array_leaves(w) for v in df.value_set(w, idx)
            if v.instruction.parent is not w.parent}


def _directly_live_out(df, v, w) -> bool:
    """Is `v` an output of the module other than through loop `w`'s result?"""
    root, carried = df.module.entry.root, _carried(df, w)
    return any(p.instruction is root and not (_leaf_set(df, root, p.index) & carried) for p in v.positions)


def _later_direct_use(df, lr, use, w, t_w) -> bool:
    """A use of an init value after the loop that does not read it through the loop's result."""
    u = use.instruction
    if u is w or u.parent is not w.parent or lr.time.get(u, -1) <= t_w:
        return False
    position = u.operands[use.operand_number]
    return not (_leaf_set(df, position, use.operand_index) & _carried(df, w))


def _conditional_copies(df, lr, cond: HloInstruction) -> list[NeededCopy]:
    out = []
    leaves = df.array_leaves(cond)
    for branch in cg.branch_computations(cond):
        out.extend(_root_copies(df, lr, branch.root, leaves, branch, lambda k: None))
    return out


def _io_alias_copies(df, lr) -> list[NeededCopy]:
    from hlo_common.analysis.alias import io_alias_spec

    module = df.module
    entry, out = module.entry, []
    for out_index, n, p_index, _ in io_alias_spec(module):
        state = (entry.parameter(n), p_index)
        out.extend(_root_copies(df, lr, entry.root, [out_index], entry, lambda k, st=state: st))
    return out


def _in_place_copies(df, lr) -> list[NeededCopy]:
    from hlo_common.analysis.alias import HloAliasAnalysis

    alias = HloAliasAnalysis.run(df, lr)
    out = []
    for instr in lr.flattened:
        if instr.opcode == "custom-call":
            continue
        for n, op_index, out_index in in_place_pairs(instr):
            ins, outs = df.value_set(instr.operands[n], op_index), df.value_set(instr, out_index)
            if not ins or not outs or alias.buffer_of(ins[0]) is alias.buffer_of(outs[0]):
                continue
            if instr.opcode == "fusion" and not can_share_operand_buffer_with_user(
                    instr.operands[n], op_index, instr, out_index):
                continue  # the fusion cannot run in place whatever we copy
            operand = instr.operands[n]
            if operand.opcode == "copy" and operand.users == [instr] and not operand.control_successors:
                continue  # already a private copy: another one cannot help (e.g. loop state outputs)
            out.append(NeededCopy(instr, n, op_index, f"%{instr.name} cannot update operand {n} in place"))
    return out


def _custom_call_copies(df, lr, cc: HloInstruction) -> list[NeededCopy]:
    """`output_to_operand_aliasing` is a must-alias: copy operands the call may not clobber."""
    out, t, entry = [], lr.time[cc], df.module.entry
    for n, op_index, _ in in_place_pairs(cc):
        operand = cc.operands[n]
        for v in df.value_set(operand, op_index):
            instr = v.instruction
            if (instr.opcode == "constant" or (instr.opcode == "parameter" and instr.parent is entry)
                    or v.live_out or lr.ranges.get(v, (0, 0))[1] > t or cc.operands.count(operand) > 1):
                out.append(NeededCopy(cc, n, op_index, f"%{cc.name} would clobber %{instr.name} in place"))
                break
    return out


def find_needed_copies(df: HloDataflowAnalysis, lr: HloLiveRange, in_place: bool = False) -> list[NeededCopy]:
    """Copies without which colocated values would interfere (read-only; see module docstring)."""
    out: list[NeededCopy] = []
    for comp in df.global_computations:
        for instr in comp.instructions:
            if instr.opcode == "while":
                out.extend(_while_copies(df, lr, instr))
            elif instr.opcode == "conditional":
                out.extend(_conditional_copies(df, lr, instr))
    out.extend(_io_alias_copies(df, lr))
    for instr in lr.flattened:
        if instr.opcode == "custom-call":
            out.extend(_custom_call_copies(df, lr, instr))
    if in_place:
        out.extend(_in_place_copies(df, lr))
    return out


# -- mutation --------------------------------------------------------------------------------------
def _new(comp: HloComputation, base: str, opcode: str, shape: Shape, operands, before, attrs=None):
    instr = HloInstruction(comp.unique_name(base), opcode, shape, operands, attrs)
    comp.add_instruction(instr, before=before)
    return instr


def _gte(comp, value: HloInstruction, i: int, shape: Shape, before) -> HloInstruction:
    return _new(comp, "get-tuple-element", "get-tuple-element", shape, [value], before, {"index": i})


def _copy_leaves(comp, value: HloInstruction, leaves: set[Index], before) -> HloInstruction:
    """`value` with the given leaves replaced by copies (tuples rebuilt as needed)."""
    if () in leaves or not value.shape.is_tuple:
        return _new(comp, "copy", "copy", value.shape, [value], before)
    elems = []
    for i, sub in enumerate(value.shape.tuple_shapes):
        elem = value.operands[i] if value.opcode == "tuple" else None
        sub_leaves = {leaf[1:] for leaf in leaves if leaf[0] == i}
        if sub_leaves:
            if elem is None:
                elem = _gte(comp, value, i, sub, before)
            elem = _copy_leaves(comp, elem, sub_leaves, before)
        elif elem is None:
            elem = _gte(comp, value, i, sub, before)
        elems.append(elem)
    return _new(comp, "tuple", "tuple", value.shape, elems, before)


def _apply(copies: list[NeededCopy]) -> None:
    groups: dict[tuple[int, int], list[NeededCopy]] = {}
    for c in copies:
        groups.setdefault((id(c.user), c.operand_number), []).append(c)
    for group in groups.values():
        user, n = group[0].user, group[0].operand_number
        comp = user.parent
        leaves = {c.index for c in group}
        if n == -1:  # a computation's root
            old = user
            # Copies of a tuple root's operands go before it; copies that read a non-tuple root
            # (a fusion, a while) must run after it: appended at the end of the sequence.
            new = _copy_leaves(comp, old, leaves, before=old if old.opcode == "tuple" else None)
            if old.opcode == "tuple" and new.opcode == "tuple" and new is not old:
                old.set_operands(new.operands)  # keep the root instruction, swap its operands
                comp.remove_instruction(new)
                new = old
            comp.root = new
            if old is not new and not old.users:
                comp.remove_instruction(old)
        else:
            old = user.operands[n]
            new = _copy_leaves(comp, old, leaves, before=user)
            user.replace_operand(n, new)
            if old.opcode in ("tuple", "get-tuple-element") and not old.users and not old.is_root:
                comp.remove_instruction(old)
        for c in group:
            leaf = _leaf_instruction(new, c.index)
            for reader in c.after:
                if leaf is not None and leaf.opcode == "copy" and reader is not leaf:
                    reader.add_control_dependency_to(leaf)


def _leaf_instruction(instr: HloInstruction, index: Index) -> HloInstruction | None:
    """The instruction producing leaf `index` of `instr` (through tuples only)."""
    for i in index:
        if instr.opcode != "tuple":
            return None
        instr = instr.operands[i]
    return instr


def insert_copies(module: HloModule, in_place: bool = True, max_rounds: int = 4) -> int:
    """Add the copies `find_needed_copies` asks for until none is needed; returns how many."""
    total = 0
    for _ in range(max_rounds):
        df = HloDataflowAnalysis.run(module)
        from hlo_common.analysis.alias import io_alias_spec
        aliased = {(n, idx) for _, n, idx, _ in io_alias_spec(module)}
        lr = HloLiveRange.run(df, aliased)
        needed = find_needed_copies(df, lr, in_place=in_place)
        if not needed:
            return total
        _apply(needed)
        total += len(needed)
    raise HloError(f"copy insertion for module {module.name} did not settle after {max_rounds} rounds")
