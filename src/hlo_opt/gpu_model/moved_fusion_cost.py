"""The cost of a fusion made by moving a large producer's body (`hlo_opt.fusion.fusion_utils`,
`MoveRecord`), from the producer's figures and a walk over the consumer's part only.

Where it sits: priority fusion seeds `GpuHloCostAnalysis` with it after a moving step, so that a
fusion growing one op at a time is costed in time proportional to the op, not to the fusion
(XLA re-walks the whole fused computation, `RevisitInstruction`; in Python that made a chain of
n ops cost n^2/2 visits).

Why it is exact: the utilization walk (`cost_analysis._fusion_utilizations`) goes from the root
towards the parameters, so the consumer's part is walked as it would be in the whole fusion, and
the producer's part sees only what reaches the producer's root. When that is one use root with
utilization 1 and IR size 1 (what the producer's root had as a root of its own fusion), every
instruction of the producer's part keeps its figures; only the use roots of the producer's
parameters change (the producer's root stands for the consumer's use root now) and parameters
read by both parts add what each part gives them. In any other case nothing is seeded and the
fusion is walked whole, as before. The figures kept exact are the ones the model reads: every
instruction's utilization and IR size, and the use roots of the parameters and the root.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.gpu_model.cost_analysis import (FusedCost, InstrCost, _fusion_output_bytes, _fusion_utilizations,
                                             shape_bytes)


def moved_fusion_cost(analysis, record, producer_cost: InstrCost | None) -> InstrCost | None:
    """The cost of `record.fusion`, or None when the shortcut does not hold (see the module doc)."""
    pfc = producer_cost.fused if producer_cost is not None else None
    proot = record.producer_root
    if pfc is None or proot.opcode == "dynamic-update-slice" or pfc.util.get(proot) != 1.0:
        return None
    comp = record.fusion.fused_computation()
    root = comp.root
    nodes = list(reversed(record.consumer_nodes))
    cfc, cflops, cir = _fusion_utilizations(nodes, root, {i: analysis._op_cost(i) for i in nodes})
    e0 = cfc.eroots.get(proot)
    if not e0 or len(e0) != 1:
        return None
    (r0,) = e0
    if cfc.root_util.get(r0) != 1.0 or cfc.root_ir.get(r0) != 1.0:
        return None
    params = comp.parameters
    relabel: dict[HloInstruction, HloInstruction] = {} if r0 is proot else {proot: r0}
    sources: dict[HloInstruction, list] = {}
    old_param_ir = 0.0
    for param in params:
        q = record.absorbed.get(param)
        if q is None and param in pfc.util:
            q = param
        sources[param] = [(cfc, param, {})]
        if q is not None:
            old_param_ir += pfc.ir[q]
            sources[param].append((pfc, q, relabel if q is param else {**relabel, q: param}))
    _take_part(pfc, cfc, nodes)
    if r0 is proot:  # a non-elementwise use keeps it a use root, as it was
        pfc.root_util[proot] = cfc.root_util[proot]
        pfc.root_ir[proot] = cfc.root_ir[proot]
    param_ir = _merge_parameters(pfc, params, sources)
    pfc.root = root
    extra = _constant_bytes(producer_cost) + _new_constant_bytes(nodes)
    return _instr_cost(analysis, pfc, params, producer_cost.flops + cflops, extra,
                       producer_cost.ir_size - old_param_ir + cir + param_ir)


def grown_fusion_cost(analysis, record, consumer_cost: InstrCost | None) -> InstrCost | None:
    """The cost of `record.fusion` after a producer was cloned into it (`fusion_utils.GrowRecord`):
    the consumer's part keeps its figures, the clones are walked from what the removed parameter
    received."""
    cfc = consumer_cost.fused if consumer_cost is not None else None
    removed = record.removed_param
    comp = record.fusion.fused_computation()
    if cfc is None or removed not in cfc.util or comp.root is not cfc.root:
        return None
    proot = record.producer_root
    received = cfc.eroots.get(removed, {})

    def seed(fc: FusedCost) -> None:
        roots: dict[HloInstruction, None] = {}
        for r in received:
            key = proot if r is removed else r
            roots[key] = None
            fc.root_util[key] = cfc.root_util.get(r, 0.0)
            fc.root_ir[key] = cfc.root_ir.get(r, 0.0)
        fc.eroots[proot] = roots

    nodes = list(reversed(record.new_nodes))
    wfc, wflops, wir = _fusion_utilizations(nodes, comp.root, {i: analysis._op_cost(i) for i in nodes}, seed)
    params = comp.parameters
    old_param_ir = cfc.ir[removed]
    sources: dict[HloInstruction, list] = {}
    for param in params:
        sources[param] = [(wfc, param, {})]
        if param in cfc.util:
            old_param_ir += cfc.ir[param]
            sources[param].insert(0, (cfc, param, {}))
    _take_part(cfc, wfc, nodes)
    for table in (cfc.util, cfc.ir, cfc.eroots, cfc.root_util, cfc.root_ir):
        table.pop(removed, None)
    param_ir = _merge_parameters(cfc, params, sources)
    extra = _constant_bytes(consumer_cost) + _new_constant_bytes(nodes)
    return _instr_cost(analysis, cfc, params, consumer_cost.flops + wflops, extra,
                       consumer_cost.ir_size - old_param_ir + wir + param_ir)


def _take_part(base: FusedCost, part: FusedCost, nodes: list[HloInstruction]) -> None:
    """A walked part's figures join the fusion's (`base`)."""
    for x in nodes:
        base.util[x] = part.util[x]
        base.ir[x] = part.ir[x]
        base.eroots[x] = part.eroots[x]
        base.root_util[x] = part.root_util.get(x, 0.0)
        base.root_ir[x] = part.root_ir.get(x, 0.0)


def _merge_parameters(base: FusedCost, params: list[HloInstruction], sources: dict) -> float:
    """Use roots, utilization and IR size of every parameter from what each part gives it
    (`sources[param]`: (figures, the parameter as that part knew it, relabelling of its use
    roots)), written into `base`; returns the parameters' IR size."""
    for param in params:
        roots: dict[HloInstruction, None] = {}
        root_util = root_ir = 0.0
        for fc, key, relabel in sources[param]:
            for r in fc.eroots.get(key, ()):
                roots[relabel.get(r, r)] = None
            root_util += fc.root_util.get(key, 0.0)
            root_ir += fc.root_ir.get(key, 0.0)
            if key is not param and fc is base:
                for table in (base.util, base.ir, base.eroots, base.root_util, base.root_ir):
                    table.pop(key, None)
        base.eroots[param] = roots
        base.root_util[param] = root_util
        base.root_ir[param] = root_ir
    total = 0.0
    for param in params:
        roots = base.eroots[param]
        base.util[param] = sum(base.root_util[r] for r in roots)
        base.ir[param] = t = sum(base.root_ir.get(r, 0.0) for r in roots)
        total += t
    return total


def _instr_cost(analysis, fc: FusedCost, params: list[HloInstruction], flops: float, extra_bytes: int,
                ir_size: float) -> InstrCost:
    obytes, outil = [], []
    for param in params:
        u = fc.util[param]
        if not analysis.count_multiple_input_accesses:
            u = min(u, 1.0)
        obytes.append(round(shape_bytes(param.shape) * u))
        outil.append(fc.util[param])
    return InstrCost(flops, _fusion_output_bytes(fc.root), obytes, outil, extra_bytes, ir_size, fc)


def _constant_bytes(cost: InstrCost) -> int:
    return cost.bytes_accessed - cost.output_bytes - sum(cost.operand_bytes)


def _new_constant_bytes(nodes: list[HloInstruction]) -> int:
    return sum(shape_bytes(i.shape) for i in nodes
               if i.opcode == "constant" and i.shape.is_array and i.shape.num_elements > 1)
