"""The partitioner's handler for a variadic reduce (several operands reduced together, a tuple
result: argmax's value and index), after XLA's HandleReduce in xla/service/spmd/spmd_partitioner.cc.

Every operand takes the first operand's tiling and each device reduces its tiles. Where a reduced
dim is split, the partial results cannot go through one all-reduce (the reducer combines the
operands together), so, as XLA does, each device's partial results are gathered along a new
leading dim over the devices that hold the other parts of the reduced dims, and reduced once more
with the same reducer.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.spmd import rules
from hlo_opt.spmd.tiling import Tiling


def handle_variadic_reduce(p, instr: HloInstruction) -> bool:
    k = len(instr.operands) // 2
    sources, inits = instr.operands[:k], instr.operands[k:]
    have = p.values[sources[0]][1]
    if not isinstance(have, Tiling) or any(s.shape.rank != have.rank for s in sources):
        return False
    dims = tuple(instr.attrs["dimensions"])
    result = rules.reduce_forward(have, dims)
    shapes = instr.shape.tuple_shapes
    if any(result.local_dims(s.dims) is None for s in shapes):
        return False
    local_inits = [p.get(i, p.replicated(i.shape)) for i in inits]
    operands = [p.get(s, have) for s in sources] + local_inits
    local = Shape.tuple_of([p.local(s, result, instr) for s in shapes])
    new = instr.clone(new_operands=operands, shape=local, name=p.b.comp.unique_name(instr.name))
    new.sharding = None
    p.b.comp.add_instruction(new)
    partial = [d for d in dims if have.tiles[d] > 1]
    if partial:  # each device's partial results side by side, then reduced again
        groups = have.groups(partial)
        gathered = []
        for j, s in enumerate(local.tuple_shapes):
            part = p.b.add("get-tuple-element", [new], s, {"index": j})
            part = p.b.add("reshape", [part], s.with_dims((1, *s.dims)))
            gathered.append(p.b.all_gather(part, groups, 0))
        new = p.b.add("reduce", gathered + local_inits, local,
                      {"dimensions": (0,), "to_apply": instr.attrs["to_apply"]})
    p.values[instr] = (new, tuple(result for _ in shapes))
    return True
