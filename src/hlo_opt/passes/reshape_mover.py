"""ReshapeMover ("reshape-mover"): reshapes and transposes sink below elementwise ops.

Runs in every `simplification` round. When the operands of an elementwise op are the same
reshape (or transpose) of their inputs, the op runs on the inputs and one rearrange follows it;
equivalent rearranges then meet and algsimp folds them:

    %a = f32[8] reshape(f32[2,4] %x)
    %b = f32[8] reshape(f32[2,4] %y)
    %s = f32[8] add(%a, %b)               =>   %s = f32[8] reshape(f32[2,4] add(%x, %y))

A "rearrange" is a reshape or transpose. An elementwise op is a candidate when some operand is a
rearrange that cannot be trivially undone, every rearrange operand is equivalent to it (same
opcode and dimensions, same input dimensions for reshapes) and every other operand can take the
inverse rearrange trivially: constants, an rng with one user, and broadcasts with sorted
dimensions that are scalar (for reshapes) or whose broadcast dimensions keep their order (for
transposes; with `reshape_of_1d_broadcast_is_cheap`, as XLA:GPU runs it, also broadcasts of an
effective vector and broadcasts whose dimensions the reshape leaves unmodified). A rearrange is
moved only when all its users move with it (candidates whose rearranges have other users are
dropped until nothing changes). Fusion computations are left alone; a moved op loses its sharding.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import make_reshape, make_transpose, non_fusion_computations
from hlo_opt.deferred_removal import DeferredRemoval
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

_REARRANGES = ("reshape", "transpose")


def inverse_permutation(perm) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _is_identity(perm) -> bool:
    return tuple(perm) == tuple(range(len(perm)))


def equivalent_rearranges(a: HloInstruction, b: HloInstruction) -> bool:
    if a.opcode != b.opcode or a.shape.dims != b.shape.dims:
        return False
    if a.opcode == "transpose":
        return tuple(a.attrs["dimensions"]) == tuple(b.attrs["dimensions"])
    return a.operands[0].shape.dims == b.operands[0].shape.dims


def common_factors(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[int, int]]:
    """XLA's CommonFactors: the (i, j) with prod(a[:i]) == prod(b[:j]), in order."""
    prod_a = prod_b = 1
    for d in a:
        prod_a *= d
    for d in b:
        prod_b *= d
    if prod_a != prod_b:
        return []
    if prod_a == 0:
        return [(0, 0), (len(a), len(b))]
    bounds: list[tuple[int, int]] = []
    i = j = 0
    prior = (-1, -1)
    pa = pb = 1
    while True:
        if pa == pb and (i > prior[0] or j > prior[1]):
            prior = (i, j)
            bounds.append(prior)
            continue
        in_i, in_j = i < len(a), j < len(b)
        if not (in_i or in_j):
            return bounds
        next_a = pa < pb or (in_i and (not in_j or (pa == pb and a[i] <= b[j])))
        next_b = pb < pa or (in_j and (not in_i or (pa == pb and b[j] <= a[i])))
        if next_a:
            pa, i = pa * a[i], i + 1
        if next_b:
            pb, j = pb * b[j], j + 1


def reshape_leaves_dimensions_unmodified(from_dims, to_dims, dims) -> list[int] | None:
    """Where the (sorted) dimensions `dims` of `from_dims` land in `to_dims`, if a reshape keeps them."""
    factors = common_factors(tuple(from_dims), tuple(to_dims))
    unmodified = dict(f for f, g in zip(factors, factors[1:]) if g[0] == f[0] + 1 and g[1] == f[1] + 1)
    if not all(d in unmodified for d in dims):
        return None
    return [unmodified[d] for d in dims]


def can_trivially_rearrange(instr: HloInstruction, rearrange: HloInstruction,
                            reshape_of_1d_broadcast_is_cheap: bool = False) -> bool:
    """Whether `instr` can take the inverse of `rearrange` for free."""
    if rearrange.opcode == "reshape" and rearrange.shape == rearrange.operands[0].shape:
        return True
    if rearrange.opcode == "transpose" and _is_identity(rearrange.attrs["dimensions"]):
        return True
    if instr.opcode == "constant" or (instr.opcode == "rng" and len(instr.users) == 1):
        return True
    if instr.opcode == "broadcast":
        dims = list(instr.attrs["dimensions"])
        if dims != sorted(dims):
            return False
        if rearrange.opcode == "reshape":
            source = instr.operands[0].shape
            cheap = reshape_of_1d_broadcast_is_cheap and (
                sum(d != 1 for d in source.dims) <= 1 or reshape_leaves_dimensions_unmodified(
                    rearrange.shape.dims, rearrange.operands[0].shape.dims, dims) is not None)
            return source.rank == 0 or cheap
        perm = rearrange.attrs["dimensions"]  # where the inverse transpose sends broadcast dims
        moved = [perm[d] for d in dims]
        return moved == sorted(moved)
    return False


def first_nontrivial_rearrange(instr: HloInstruction, cheap_1d: bool) -> HloInstruction | None:
    for op in instr.operands:
        if op.opcode in _REARRANGES and not can_trivially_rearrange(op.operands[0], op, cheap_1d):
            return op
    return None


def is_candidate(instr: HloInstruction, cheap_1d: bool) -> bool:
    if not is_elementwise(instr.opcode):
        return False
    rearrange = first_nontrivial_rearrange(instr, cheap_1d)
    if rearrange is None:
        return False
    return all(equivalent_rearranges(op, rearrange) if op.opcode in _REARRANGES
               else can_trivially_rearrange(op, rearrange, cheap_1d) for op in instr.operands)


def apply_inverse(rearrange: HloInstruction, operand: HloInstruction) -> HloInstruction:
    if rearrange.opcode == "reshape":
        target = rearrange.operands[0].shape.dims
        if operand.shape.dims == target:
            return operand
        if operand.opcode == "reshape" and operand.operands[0].shape.dims == target:
            return operand.operands[0]
        return make_reshape(operand, target)
    return make_transpose(operand, inverse_permutation(rearrange.attrs["dimensions"]))


def sink_rearrange_operands(instr: HloInstruction, cheap_1d: bool, removal: DeferredRemoval) -> None:
    comp = instr.parent
    rearrange = first_nontrivial_rearrange(instr, cheap_1d)
    operands = [apply_inverse(rearrange, op) for op in instr.operands]
    inner_dims = rearrange.operands[0].shape.dims
    new_op = instr.clone_with_new_operands(operands, shape=Shape.array(instr.shape.element_type, inner_dims))
    new_op.name = comp.unique_name(instr.name)
    new_op.sharding = None
    comp.add_instruction(new_op)
    attrs = {"dimensions": tuple(rearrange.attrs["dimensions"])} if rearrange.opcode == "transpose" else {}
    moved = comp.add_new_instruction(rearrange.opcode, [new_op], instr.shape, attrs, name=rearrange.opcode)
    removal.replace(instr, moved)


def settle_candidates(candidates: list[HloInstruction]) -> list[HloInstruction]:
    """Drop candidates until every rearrange operand of the rest has only candidate users."""
    alive = {id(c) for c in candidates}
    removed = True
    while alive and removed:
        removed = False
        rearranges = {id(op): op for c in candidates if id(c) in alive for op in c.operands
                      if op.opcode in _REARRANGES}
        for op in rearranges.values():
            if any(id(u) not in alive for u in op.users):
                for u in op.users:
                    if id(u) in alive:
                        alive.discard(id(u))
                        removed = True
    return [c for c in candidates if id(c) in alive]


@register_pass
@dataclass
class ReshapeMover(HloPass):
    """Moves reshapes and transposes from the operands of elementwise ops to their result."""

    name = "reshape-mover"
    reshape_of_1d_broadcast_is_cheap: bool = False  # XLA:GPU's simplification sets it

    def run(self, module: HloModule) -> bool:
        changed = False
        cheap_1d = self.reshape_of_1d_broadcast_is_cheap
        for comp in non_fusion_computations(module):
            candidates = settle_candidates([i for i in comp.instructions if is_candidate(i, cheap_1d)])
            removal = DeferredRemoval()
            for instr in candidates:
                sink_rearrange_operands(instr, cheap_1d, removal)
            removal.finish()
            changed |= bool(candidates)
        return changed
