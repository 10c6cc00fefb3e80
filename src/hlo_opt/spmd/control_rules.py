"""Sharding propagation through tuples, while loops and conditionals (xla/service/
sharding_propagation.cc: a while's operand, result, body parameter, body root and condition
parameter share one sharding; a branch's parameter takes its operand's, its root the result's).

Tuple tilings may be partial while propagating (a None leaf: not known yet) and are merged leaf
by leaf, each leaf taking the more tiled candidate. A loop's carried tiling comes from the
computation around it (its operand, the users of its result); its body and condition are then
propagated with that tiling fixed on their parameter (and on the body's root), so that every
iteration hands the next one the layout it expects; before that, a carried leaf the body itself
tiles more finely (from the loop's other inputs) is refined.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.spmd.tiling import Tiling


def merge_tuple(current, t):
    """`current` refined leaf by leaf by `t` (both tuples, None leaves unknown); None where
    nothing is known or `current` is not a tuple."""
    if current is None:
        return t if _known(t) else None
    if not isinstance(current, tuple) or len(current) != len(t):
        return None
    return tuple(_merge_leaf(c, e) for c, e in zip(current, t))


def _merge_leaf(c, e):
    if e is None:
        return c
    if c is None:
        return e
    if isinstance(c, tuple) and isinstance(e, tuple):
        return merge_tuple(c, e)
    if isinstance(c, Tiling) and isinstance(e, Tiling) and e.rank == c.rank and e.num_tiles > c.num_tiles:
        return e
    return c


def _known(t) -> bool:
    if isinstance(t, tuple):
        return any(_known(e) for e in t)
    return t is not None


def tuple_from_users(instr: HloInstruction, tilings: dict):
    """A tuple-shaped value's tiling as its users want it: a get-tuple-element its leaf, a while
    (whose operand it is) or a tuple (holding it) theirs. None where no user says anything."""
    out = tuple([None] * len(instr.shape.tuple_shapes))
    for user in instr.users:
        t = tilings.get(user)
        if t is None or user.parent is not instr.parent:
            continue
        if user.opcode == "get-tuple-element":
            leaves = [None] * len(out)
            leaves[user.attrs["index"]] = t
            out = merge_tuple(out, tuple(leaves)) or out
        elif user.opcode == "while" and isinstance(t, tuple):
            out = merge_tuple(out, t) or out
        elif user.opcode == "tuple" and isinstance(t, tuple):
            for k, op in enumerate(user.operands):
                if op is instr and isinstance(t[k], tuple):
                    out = merge_tuple(out, t[k]) or out
    return out if _known(out) else None


def refined_carry(loop: HloInstruction, carried, n: int, propagate, rounds: int = 3):
    """The carried tiling refined by what the body makes of it: the body propagated with only its
    parameter fixed, a leaf of its root more tiled than the carried one is taken (a carry that
    the loop's inputs split, e.g. a scan over a split batch), until nothing changes (XLA
    iterates propagation through the loop the same way)."""
    body = loop.attrs["body"]
    for _ in range(rounds):
        inner = propagate(body, n, {body.parameters[0]: carried}, free_root=True)
        refined = merge_tuple(carried, inner[body.root]) if isinstance(carried, tuple) else None
        if refined is None or refined == carried:
            break
        carried = refined
    return carried


def loop_tilings(loop: HloInstruction, carried, n: int, propagate) -> dict:
    """The tilings inside `loop`'s body and condition, the carried tiling fixed on their
    parameters and the body's root (`propagate(comp, n, given)` is the computation-level pass)."""
    body, cond = loop.attrs["body"], loop.attrs["condition"]
    out = propagate(body, n, {body.parameters[0]: carried, body.root: carried})
    scalar = Tiling.replicated(0, n)
    root = _replicated(cond.root.shape, n, scalar)
    out.update(propagate(cond, n, {cond.parameters[0]: carried, cond.root: root}))
    return out


def _replicated(shape: Shape, n: int, scalar: Tiling):
    if shape.is_tuple:
        return tuple(_replicated(s, n, scalar) for s in shape.tuple_shapes)
    return Tiling.replicated(shape.rank, n)


def branches(cond: HloInstruction) -> list:
    """A conditional's branch computations, in operand order (operand k + 1 is branch k's)."""
    if "branch_computations" in cond.attrs:
        return list(cond.attrs["branch_computations"])
    return [cond.attrs["true_computation"], cond.attrs["false_computation"]]


def branch_tilings(cond: HloInstruction, tilings: dict, n: int, propagate) -> dict:
    """The tilings inside each branch: its parameter as the operand handed to it, its root as the
    conditional's result."""
    out: dict = {}
    for k, comp in enumerate(branches(cond)):
        given = {comp.root: tilings[cond]}
        if comp.parameters:
            given[comp.parameters[0]] = tilings[cond.operands[k + 1]]
        out.update(propagate(comp, n, given))
    return out
