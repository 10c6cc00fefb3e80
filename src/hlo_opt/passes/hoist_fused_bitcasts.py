"""HoistFusedBitcasts ("hoist-fused-bitcasts"): bitcasts and reshapes inside a GEMM fusion move
out of it, to the fusion's operands, so the fused computation holds only the ops Triton tiles
(`xla/backends/gpu/transforms/hoist_fused_bitcasts.cc`).

Where it sits: "hlo normalization", right after `triton-gemm-rewriter` (passes/gemm_fusion.py), as
in gpu_compiler.cc. It matters most for dots split by `splitk-rewriter`, which reach GemmFusion
as dot(reshape(broadcast(p)), reshape(q)):

    body:  b = bf16[128,256] broadcast(bf16[256] p0), dimensions={1}
           r = bf16[128,8,32] reshape(b);  s = bf16[8,32,64] reshape(bf16[256,64] p1)
           d = f32[8,128,64] dot(r, s), ...
    after: p0 = bf16[8,32] parameter(0);  b = bf16[128,8,32] broadcast(p0), dimensions={1,2}
           p1 = bf16[8,32,64] parameter(1);  d = f32[8,128,64] dot(b, p1), ...
           and the caller passes bitcast(a) and bitcast(w) in

A bitcast is hoisted when every producer above it feeds only it (the others stay): parameters
and constants take the new shape (the caller bitcasts its operand), elementwise ops pass the
shape through, broadcasts and transposes have their dimensions recomputed when the bitcast does
not mix broadcast and operand dimensions (or, for a transpose, keeps its groups contiguous).
Bitcasts after the dot are first cancelled by a bitcast at the root, so only the upward move is
needed, as XLA does. Fusions of kind `__cudnn$fusion` are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.algsimp.shapes import common_factors, reshape_is_bitcast

BITCASTS = ("bitcast", "reshape")


class CannotHoist(Exception):
    """This bitcast stays where it is (XLA logs the reason and goes on)."""


def _physical(shape: Shape) -> tuple[int, ...]:
    return tuple(shape.dims[d] for d in shape.minor_to_major)


def _inverse(perm) -> list[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


def _shape(etype, dims, minor_to_major) -> Shape:
    return Shape.array(etype, dims, tuple(minor_to_major))


def _same_element(shape: Shape, like: Shape) -> Shape:
    """`shape`'s dimensions and layout with `like`'s element type."""
    return _shape(like.element_type, shape.dims, shape.minor_to_major)


def common_factors_merging_trivial(a, b) -> list[tuple[int, int]]:
    """CommonFactors without its empty groups (product 1 on one side): each is merged into the
    next group, or into the previous one when it is the last (XLA's
    detail::CommonFactorsMergingTrivialRanges)."""
    bounds = common_factors(tuple(a), tuple(b))
    i = 0
    while i + 1 < len(bounds) and len(bounds) > 2:
        (a0, b0), (a1, b1) = bounds[i], bounds[i + 1]
        if a0 != a1 and b0 != b1:
            i += 1
        elif i + 2 == len(bounds):
            del bounds[i]
        else:
            del bounds[i + 1]
    return bounds


def bitcast_of_broadcast(bcast: HloInstruction, result: Shape) -> tuple[Shape, list[int]]:
    """bitcast(broadcast(x)) -> broadcast(bitcast(x)): the inner bitcast's shape and the new
    broadcast dimensions (XLA's CalculateBitcastOfBroadcast)."""
    shape = bcast.shape
    is_operand = [False] * shape.rank
    for d in bcast.attrs["dimensions"]:
        is_operand[d] = True
    bphys = _physical(shape)
    factors = common_factors(_physical(result), bphys)
    new_dims: list[int] = []
    for (r_from, b_from), (r_to, b_to) in zip(factors, factors[1:]):
        flags = [is_operand[shape.minor_to_major[j]] for j in range(b_from, b_to) if bphys[j] != 1]
        if not any(flags):
            continue
        if not all(flags):
            raise CannotHoist(f"{bcast.name} mixes operand and broadcast dimensions")
        new_dims += [result.minor_to_major[j] for j in range(r_from, r_to)]
    new_dims.sort()
    layout = [new_dims.index(i) for i in result.minor_to_major if i in new_dims]
    return _shape(result.element_type, [result.dims[i] for i in new_dims], layout), new_dims


def _bitcast_of_transpose_impl(result: Shape, transposed: Shape, operand: Shape, perm) -> tuple[Shape, list]:
    """XLA's CalculateBitcastOfTransposeImpl: the bitcast of the transpose's operand and the
    inverse permutation of the new transpose."""
    n_op = operand.rank
    to_result = [(0, 0)] * n_op
    op_inv = _inverse(operand.minor_to_major)
    factors = common_factors_merging_trivial(_physical(result), _physical(transposed))
    for (r_from, t_from), (r_to, t_to) in zip(factors, factors[1:]):
        indices = []
        for j in range(t_from, t_to):
            dim = transposed.minor_to_major[j]
            index = op_inv[perm[dim]]
            if transposed.dims[dim] == 1:
                to_result[index] = (r_from, r_from)
                continue
            to_result[index] = (r_from, r_to)
            r_from = r_to
            indices.append(index)
        if indices and (indices[-1] - indices[0] >= len(indices) or indices != sorted(indices)):
            raise CannotHoist("transpose groups are not contiguous")
    new_dims = [0] * result.rank
    dims = [0] * result.rank
    j = 0
    for i in range(n_op):
        lo, hi = to_result[i]
        for k in range(lo, hi):
            new_index = result.minor_to_major[j]
            j += 1
            r_index = result.minor_to_major[k]
            dims[new_index] = result.dims[r_index]
            new_dims[new_index] = r_index
    return _shape(result.element_type, dims, result.minor_to_major), new_dims


def bitcast_of_transpose(tr: HloInstruction, result: Shape) -> tuple[Shape, list[int]]:
    """bitcast(transpose(x)) -> transpose(bitcast(x)) (XLA's CalculateBitcastOfTranspose)."""
    if tr.shape.minor_to_major != tr.operands[0].shape.minor_to_major:
        raise CannotHoist(f"{tr.name} changes the layout")
    shape, inv = _bitcast_of_transpose_impl(result, tr.shape, tr.operands[0].shape, tr.attrs["dimensions"])
    return shape, _inverse(inv)


def _producers(instr: HloInstruction) -> list[HloInstruction]:
    seen: dict[int, HloInstruction] = {}
    work = list(instr.operands)
    while work:
        x = work.pop()
        if id(x) not in seen:
            seen[id(x)] = x
            work += x.operands
    return list(seen.values())


def plan_hoist(bitcast: HloInstruction) -> list[tuple[HloInstruction, Shape]]:
    """The new shapes of the producers of `bitcast` once it is gone, consumers first (XLA's
    PlanHoistBitcastUpwardsToCallers). Raises CannotHoist."""
    producers = _producers(bitcast)
    ids = {id(p) for p in producers} | {id(bitcast)}
    if any(id(u) not in ids for p in producers for u in p.users):
        raise CannotHoist("a producer has other users")
    if bitcast.shape.element_type != bitcast.operands[0].shape.element_type:
        raise CannotHoist("the bitcast converts the type")
    if bitcast.opcode == "reshape" and not reshape_is_bitcast(bitcast.operands[0].shape, bitcast.shape):
        raise CannotHoist("the reshape moves data")  # XLA sees only bitcast reshapes here
    wanted: dict[int, Shape] = {}

    def want(instrs, shape: Shape) -> None:
        for x in instrs:
            new = _same_element(shape, x.shape)
            if new.num_elements != x.shape.num_elements:
                raise CannotHoist(f"{x.name}: element count differs")
            if wanted.setdefault(id(x), new) != new:
                raise CannotHoist(f"conflicting shapes for {x.name}")

    want(bitcast.operands, bitcast.shape)
    plan = []
    for instr in reversed(bitcast.parent.post_order()):
        new = wanted.get(id(instr))
        if new is None or new == instr.shape:
            continue
        plan.append((instr, new))
        op = instr.opcode
        if op == "constant" and instr.shape.rank > 0:
            raise CannotHoist("array constants keep their shape")  # ours: no literal relayout
        if op in ("parameter", "constant") or op in BITCASTS:
            continue
        if op == "broadcast":
            want(instr.operands, bitcast_of_broadcast(instr, new)[0])
        elif op == "transpose":
            want(instr.operands, bitcast_of_transpose(instr, new)[0])
        elif is_elementwise(op):
            want(instr.operands, new)
        else:
            raise CannotHoist(f"cannot hoist past {instr.name}")
    return plan


def _add_bitcast(comp: HloComputation, shape: Shape, operand: HloInstruction,
                 before: HloInstruction | None = None) -> HloInstruction:
    return comp.add_instruction(HloInstruction(comp.unique_name("bitcast"), "bitcast", shape, [operand]),
                                before=before)


def hoist(bitcast: HloInstruction, fusion: HloInstruction) -> None:
    """Moves `bitcast` to the fusion's caller (XLA's HoistBitcastUpwardsToCallers)."""
    plan = plan_hoist(bitcast)
    caller = fusion.parent
    for instr, new in plan:
        if instr.opcode == "parameter":
            number = instr.parameter_number
            operand = fusion.operands[number]
            fusion.replace_operand(number, _add_bitcast(caller, new, operand, before=fusion))
        elif instr.opcode == "broadcast":
            instr.attrs["dimensions"] = tuple(bitcast_of_broadcast(instr, new)[1])
        elif instr.opcode == "transpose":
            instr.attrs["dimensions"] = tuple(bitcast_of_transpose(instr, new)[1])
        instr.shape = new
    comp = bitcast.parent
    source = bitcast.operands[0]
    if bitcast is comp.root:
        comp.root = source
    bitcast.replace_all_uses_with(source)
    comp.remove_instruction(bitcast)


def root_shape_after_hoisting(dot: HloInstruction) -> Shape | None:
    """The fusion's result shape once the bitcasts between the dot and the root are cancelled
    (XLA's ComputeRootShapeAfterHoistingBitcasts). Broadcasts and transposes after the dot keep
    their shape here (XLA recomputes them; none of the fusions GemmFusion builds has one after a
    bitcast). None: an op the shape cannot pass."""
    comp = dot.parent
    if dot is comp.root:
        return dot.shape
    operand_shape: dict[int, Shape] = {id(u): dot.shape for u in dot.users}
    order = comp.post_order()
    for instr in order[order.index(dot) + 1:]:
        shape = operand_shape.get(id(instr))
        if shape is None:
            continue
        if instr.opcode in ("broadcast", "transpose"):
            result = instr.shape
        elif instr.opcode in BITCASTS or is_elementwise(instr.opcode):
            result = _same_element(shape, instr.shape)
        else:
            return None
        if instr is comp.root:
            return result
        for user in instr.users:
            if operand_shape.setdefault(id(user), result) != result:
                return None
    return None


def _insert_root_bitcast(dot: HloInstruction, fusion: HloInstruction) -> bool:
    """A bitcast at the root that undoes the bitcasts after the dot; the caller bitcasts the
    fusion's result back (XLA's MaybeInsertRootBitcast)."""
    comp = dot.parent
    shape = root_shape_after_hoisting(dot)
    if shape is None or shape == comp.root.shape:
        return False
    comp.root = _add_bitcast(comp, shape, comp.root)
    caller = fusion.parent
    old_shape = fusion.shape
    users = list(fusion.users)
    was_root = fusion is caller.root
    fusion.shape = shape
    fusion.sharding = None  # a sharding of the old shape may not fit the new one (as XLA)
    back = _add_bitcast(caller, old_shape, fusion)
    for user in users:
        user.replace_operand_with(fusion, back)
    if was_root:
        caller.root = back
    return True


def hoist_in_fusion(fusion: HloInstruction) -> bool:
    body = fusion.fused_computation()
    dot = next((i for i in body.post_order() if i.opcode in ("dot", "scaled-dot")), None)
    if dot is None:
        return False
    changed = _insert_root_bitcast(dot, fusion)
    for instr in reversed(body.post_order()):
        if instr.opcode in BITCASTS and instr.parent is body:
            try:
                hoist(instr, fusion)
                changed = True
            except CannotHoist:
                pass
    return changed


@register_pass
@dataclass
class HoistFusedBitcasts(HloPass):
    """Bitcasts and reshapes in GEMM fusions move to the fusions' operands (XLA's HoistFusedBitcasts)."""

    name = "hoist-fused-bitcasts"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in comp.post_order():
                if instr.opcode == "fusion" and _kind(instr) != "__cudnn$fusion":
                    changed |= hoist_in_fusion(instr)
        return changed


def _kind(fusion: HloInstruction) -> str | None:
    config = fusion.backend_config_data
    if isinstance(config, dict):
        return config.get("fusion_backend_config", {}).get("kind")
    return None


__all__ = ["HoistFusedBitcasts", "bitcast_of_broadcast", "bitcast_of_transpose",
           "common_factors_merging_trivial", "plan_hoist"]
