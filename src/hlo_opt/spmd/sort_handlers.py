"""sort partitioned along the dims it does not sort (XLA's HandleSort in xla/service/spmd/
spmd_partitioner.cc and the sort case of sharding_propagation.cc): every operand (keys and the
values sorted with them, as jnp.argsort writes it) takes one tiling with the sorted dim whole,
and each device sorts its rows locally; a split along the sorted dim is gathered first.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.spmd.tiling import Tiling


def _dim(sort: HloInstruction) -> int:
    return sort.attrs["dimensions"][0]


def layout(sort: HloInstruction, t: Tiling) -> Tiling:
    """The tiling every operand and result of `sort` takes from one of them."""
    return t.to_replication([_dim(sort)])


def forward(sort: HloInstruction, tilings: dict):
    """Propagation: the result's tiling (a tuple for several operands) from the most tiled
    operand's."""
    known = [tilings.get(op) for op in sort.operands]
    known = [t for t in known if isinstance(t, Tiling)]
    if not known:
        return None
    t = layout(sort, max(known, key=lambda t: t.num_tiles))
    return tuple(t for _ in sort.operands) if sort.shape.is_tuple else t


def operand(sort: HloInstruction, index: int, t) -> Tiling | None:
    """Propagation backward: what operand `index` should hold for the result's tiling."""
    leaf = t[index] if isinstance(t, tuple) else t
    return layout(sort, leaf) if isinstance(leaf, Tiling) else None


def handle_sort(p, instr: HloInstruction) -> bool:
    want = p.wanted(instr)
    leaves = list(want) if isinstance(want, tuple) else [want]
    if not all(isinstance(t, Tiling) for t in leaves):
        return False
    t = layout(instr, max(leaves, key=lambda t: t.num_tiles))
    if any(t.local_dims(op.shape.dims) is None for op in instr.operands):
        return False
    operands = [p.get(op, t) for op in instr.operands]
    shape = Shape.tuple_of([o.shape for o in operands]) if instr.shape.is_tuple else operands[0].shape
    new = instr.clone(new_operands=operands, shape=shape, name=p.b.comp.unique_name(instr.name))
    new.sharding = None
    p.b.comp.add_instruction(new)
    p.values[instr] = (new, tuple(t for _ in operands) if instr.shape.is_tuple else t)
    return True
