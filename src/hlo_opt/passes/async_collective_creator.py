"""AsyncCollectiveCreator ("async-collective-creator"): all-reduce, all-gather and
collective-permute become start/done pairs (xla/service/async_collective_creator.cc, with the
kinds XLA:GPU converts by default), so the scheduler can issue the transfer early and wait for it
late, while independent kernels run.

Where it sits: at the end of the `post-fusion optimization` pipeline, after the combiners (in
gpu_compiler.cc RunPostFusionCollectiveOptimizationPasses runs it right after them); the
`hlo-memory-scheduler` then moves each start up to its operands and each done down to its first
user. The shapes are the ones jaxlib 0.10's XLA:GPU writes:

    ar = f32[N] all-reduce(x), ...          =>  s = f32[N] all-reduce-start(x), ...;  ar = f32[N] all-reduce-done(s)
    ag = f32[2N] all-gather(x), ...         =>  s = (f32[N], f32[2N]) all-gather-start(x), ...
                                                ag = f32[2N] all-gather-done(s)
    (a combined all-gather: ((operands), (results)) all-gather-start)
    cp = f32[N] collective-permute(x), ...  =>  s = (f32[N], f32[N]) collective-permute-start(x), ...
                                                cp = f32[N] collective-permute-done(s)

reduce-scatter and all-to-all have no start/done opcodes of their own: as XLA:GPU does, each is
wrapped in a computation run by `async-start` / `async-done` (XLA prints that pair as
`reduce-scatter-start` / `-done`), ((operands), result) like jaxlib 0.10's; hlo-codegen runs the
wrapped computation as a call.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

CONVERTED = ("all-reduce", "all-gather", "collective-permute")
WRAPPED = ("reduce-scatter", "all-to-all")


def start_shape(instr: HloInstruction) -> Shape:
    """The -start's shape for `instr` (see the module docstring)."""
    if instr.opcode == "all-reduce":
        return instr.shape
    operands = [o.shape for o in instr.operands]
    if instr.opcode == "all-gather":
        if len(operands) == 1:
            return Shape.tuple_of([operands[0], instr.shape])
        return Shape.tuple_of([Shape.tuple_of(operands), instr.shape])
    return Shape.tuple_of([operands[0], instr.shape])


@register_pass
@dataclass
class AsyncCollectiveCreator(HloPass):
    """all-reduce / all-gather / collective-permute -> *-start + *-done."""

    name = "async-collective-creator"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for instr in [i for i in comp.instructions if i.opcode in CONVERTED + WRAPPED]:
                if instr.opcode == "collective-permute" and len(instr.operands) != 1:
                    continue  # the in-place form (with its buffers and offsets) stays synchronous
                if instr.opcode in WRAPPED:
                    start, done = _wrapped(module, instr)
                else:
                    start = comp.add_new_instruction(f"{instr.opcode}-start", list(instr.operands),
                                                     start_shape(instr), dict(instr.attrs),
                                                     name=f"{instr.opcode}-start")
                    done = comp.add_new_instruction(f"{instr.opcode}-done", [start], instr.shape,
                                                    name=f"{instr.opcode}-done")
                done.sharding = instr.sharding  # a root's sharding says how hlo-run gathers it
                for p in list(instr.control_predecessors):
                    p.add_control_dependency_to(start)
                comp.replace_instruction(instr, done, remove_dead_operands=False)
                changed = True
        return changed


def _wrapped(module: HloModule, instr: HloInstruction) -> tuple[HloInstruction, HloInstruction]:
    """async-start / async-done around a computation holding a copy of `instr`."""
    comp = instr.parent
    kind = instr.opcode.replace("-", "_")
    body = HloComputation(f"wrapped_{kind}")
    params = [body.add_new_instruction("parameter", [], op.shape, name=f"param_{k}", parameter_number=k)
              for k, op in enumerate(instr.operands)]
    body.root = body.add_new_instruction(instr.opcode, params, instr.shape, dict(instr.attrs),
                                         name=instr.opcode)
    body = module.add_embedded_computation(body)
    shape = Shape.tuple_of([Shape.tuple_of([op.shape for op in instr.operands]), instr.shape])
    start = comp.add_new_instruction("async-start", list(instr.operands), shape, {"calls": body},
                                     name=f"{instr.opcode}-start")
    done = comp.add_new_instruction("async-done", [start], instr.shape, {"calls": body},
                                    name=f"{instr.opcode}-done")
    return start, done
