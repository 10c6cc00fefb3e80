"""The partitioner's handlers for while loops and conditionals (XLA's SpmdPartitioningVisitor::
HandleWhile and HandleConditional in xla/service/spmd/spmd_partitioner.cc): the body and the
condition are partitioned as computations of their own, their parameter holding the carried
tiling sharding-propagation gave the loop, the body's root resharded to it at the end of every
iteration, and the loop runs on the per-device tuple; each branch of a conditional likewise,
its parameter in its operand's tiling and its root in the conditional's. Collectives inside
take channel ids after the enclosing computation's.
"""

from __future__ import annotations

from hlo_common.hlo.hlo_computation import HloComputation
from hlo_common.hlo.hlo_creation_utils import add_embedded_computation
from hlo_common.hlo.ir import HloInstruction
from hlo_opt.spmd import control_rules
from hlo_opt.spmd.builder import SpmdBuilder
from hlo_opt.spmd.cleanup import remove_dead


def handle_while(p, instr: HloInstruction) -> bool:
    carried = p.wanted(instr)
    if not isinstance(carried, tuple) or any(isinstance(e, tuple) for e in carried):
        return False  # nested tuples: run whole
    body = partition_computation(p, instr.attrs["body"], carried)
    condition = instr.attrs["condition"]
    cond = partition_computation(p, condition, p.replicated(condition.root.shape))
    init = p.get(instr.operands[0], carried)
    new = p.b.add("while", [init], init.shape, {"condition": cond, "body": body}, name=instr.name)
    p.values[instr] = (new, carried)
    return True


def handle_conditional(p, instr: HloInstruction) -> bool:
    """Each branch partitioned with its parameter as its operand's tiling and its root as the
    conditional's; the branch index (or predicate) replicated."""
    want = p.wanted(instr)
    comps = control_rules.branches(instr)
    if instr.shape.is_tuple and any(isinstance(e, tuple) for e in want):
        return False
    operands = [p.get(instr.operands[0], p.replicated(instr.operands[0].shape))]
    new_comps = []
    for k, comp in enumerate(comps):
        operand = instr.operands[k + 1]
        param = comp.parameters[0] if comp.parameters else operand
        operands.append(p.get(operand, p.wanted(param)))
        new_comps.append(partition_computation(p, comp, want))
    attrs = {"branch_computations": list(new_comps)} if "branch_computations" in instr.attrs else \
        {"true_computation": new_comps[0], "false_computation": new_comps[1]}
    local = p._local_of(instr.shape, want, instr)
    new = p.b.add("conditional", operands, local, attrs, name=instr.name)
    p.values[instr] = (new, want)
    return True


def partition_computation(p, comp: HloComputation, root_tiling) -> HloComputation:
    """`comp` (one parameter) partitioned into a new computation of the module, its root in
    `root_tiling`."""
    from hlo_opt.spmd.handlers import Partitioner  # the handlers module dispatches to this one

    new = HloComputation(p.b.module.unique_computation_name(f"{comp.name}_spmd"))
    add_embedded_computation(p.b.module, new, before=p.b.comp)
    b = SpmdBuilder(p.b.module, new, p.n)
    b._channel = p.b._channel  # one sequence of channel ids for the module
    inner = Partitioner(b)
    params = sorted(comp.parameters, key=lambda q: q.parameter_number)
    for instr in params + [i for i in comp.post_order() if i.opcode != "parameter"]:
        inner.handle(instr)
    new.root = inner.get(comp.root, root_tiling)
    for param in new.parameters:  # per-device values inside; later passes (while-loop-simplifier
        param.sharding = None      # dropping a carried element) would leave a stale tuple sharding
    remove_dead(new)
    p.b._channel = b._channel
    return new
