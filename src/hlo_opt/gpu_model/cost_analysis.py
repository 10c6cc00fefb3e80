"""GPU cost analysis: flops, bytes read per operand, bytes written, operand utilization and IR
size of one instruction or fusion (XLA's `GpuHloCostAnalysis` over `HloCostAnalysis`, with
`count_multiple_input_accesses` on, as priority fusion runs it).

Where it sits: `hlo_opt.gpu_model.performance_model` reads these figures; the IR-size rules of
priority and multi-output fusion read `producer_consumer_merged_too_large`. Sources:
`xla/service/gpu/model/gpu_hlo_cost_analysis.cc`, `xla/service/hlo_cost_analysis.cc`.

Rules, per instruction (figures are lazily computed and cached per instruction; `invalidate`):

- elementwise ops: flops = op-profile cycles (opcode, result type) x elements (`op_profiles`);
- reduce: (input - output elements) x the flops of one application of the reducer; reduce-window:
  output elements x (window - 1) x reducer, and operand 0 read once per window element;
  concatenate: 6 per element (400 when operand 0 is not a multiple of 32 along a non-major
  concatenated dim, XLA's warp-divergence penalty); dot: 2 x output x contracted elements;
  convolution: 2 x output x kernel elements / output features; sort: n x ceil(log2 n);
- bytes: every operand read whole and the output written whole, except slice / dynamic-slice /
  gather (operand 0 read as much as the output), dynamic-update-slice (in place: operand 0 not
  read, only the update written), scatter (operand 0 read as much as the updates), broadcast and
  reduce-window (re-reads counted: utilization = reads per input element);
- a fusion: XLA's FusionCalculateUtilizations: from the root (utilization 1) towards the
  parameters, elementwise users pass their "use roots" on, other users multiply by their
  operand utilization (rounded up to whole elements); flops = sum of utilization x local flops;
  a parameter is read `size x utilization` bytes; non-scalar constants add their size to
  `bytes_accessed`; a root dynamic-update-slice writes only its update and does not read the
  updated parameter; IR size = how often each op is emitted.

An optional `op_profile` dict replaces the device's table (XLA's test hook; an empty dict
makes every elementwise op cost 3, as XLA's tests without a device).
"""

from __future__ import annotations

import functools
import math

from hlo_common.gpu.device import DeviceDescription, H100
from hlo_opt.gpu_model.op_profiles import DEFAULT_FLOPS_PER_ELEMENT, profile_for
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape

MAX_IR_SIZE = 10000           # gpu_hlo_cost_analysis.h kMaxIRSize
CONCAT_FLOPS_PER_ELEMENT = 6
CONCAT_MISALIGNED_FLOPS_PER_ELEMENT = 400
WARP = 32

_NO_BYTES = frozenset({"parameter", "get-tuple-element", "tuple", "bitcast", "constant", "after-all",
                       "opt-barrier", "partition-id", "replica-id"})


@functools.lru_cache(maxsize=4096)
def shape_bytes(shape: Shape) -> int:
    """Bytes of all array leaves (XLA's GetShapeSize over a shape; tuples add nothing)."""
    if shape.is_tuple:
        return sum(shape_bytes(s) for s in shape.tuple_shapes)
    return shape.byte_size() if shape.is_array else 0


def leaf_elements(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(leaf_elements(s) for s in shape.tuple_shapes)
    return shape.num_elements if shape.is_array else 0


def _first_array(shape: Shape) -> Shape:
    while shape.is_tuple and shape.tuple_shapes:
        shape = shape.tuple_shapes[0]
    return shape


def _is_elementwise(instr: HloInstruction) -> bool:
    """XLA's IsElementwise as FusionCalculateUtilizations uses it (a bitcast that keeps the
    dimensions counts as elementwise)."""
    op = instr.opcode
    if is_elementwise(op) or op == "map":
        return True
    if op == "bitcast" and instr.operands and instr.operands[0].shape.is_array and instr.shape.is_array:
        return instr.operands[0].shape.dims == instr.shape.dims
    return False


class InstrCost:
    """Figures of one instruction (an op, or a whole fusion)."""

    __slots__ = ("flops", "output_bytes", "operand_bytes", "operand_util", "bytes_accessed", "ir_size",
                 "fused")

    def __init__(self, flops: float, output_bytes: int, operand_bytes: list[int], operand_util: list[float],
                 extra_bytes: int = 0, ir_size: float = 1.0, fused: FusedCost | None = None):
        self.flops = flops
        self.output_bytes = output_bytes
        self.operand_bytes = operand_bytes
        self.operand_util = operand_util
        self.bytes_accessed = output_bytes + sum(operand_bytes) + extra_bytes
        self.ir_size = ir_size
        self.fused = fused


class FusedCost:
    """Per fused instruction: utilization, times emitted, and elementwise use roots."""

    __slots__ = ("util", "ir", "eroots", "root_util", "root_ir", "root")

    def __init__(self):
        self.util: dict[HloInstruction, float] = {}
        self.ir: dict[HloInstruction, float] = {}
        self.eroots: dict[HloInstruction, dict[HloInstruction, None]] = {}
        self.root_util: dict[HloInstruction, float] = {}
        self.root_ir: dict[HloInstruction, float] = {}
        self.root: HloInstruction | None = None


class GpuHloCostAnalysis:
    """Cost figures per instruction for one device (see the module docstring)."""

    def __init__(self, device: DeviceDescription = H100, op_profile: dict | None = None,
                 count_multiple_input_accesses: bool = True):
        self.device = device
        self.profile = profile_for(device.arch) if op_profile is None else {
            (op, t): c for (op, t), c in op_profile.items()}
        self.count_multiple_input_accesses = count_multiple_input_accesses
        self._cache: dict[HloInstruction, InstrCost] = {}
        self._scalar_flops: dict[HloComputation, float] = {}
        self._fusion_of: dict[HloComputation, HloInstruction] = {}

    # -- public queries --------------------------------------------------------------------------
    def cost(self, instr: HloInstruction) -> InstrCost:
        c = self._cache.get(instr)
        if c is None:
            c = self._fusion_cost(instr) if instr.opcode == "fusion" else self._op_cost(instr)
            self._cache[instr] = c
        return c

    def invalidate(self, instr: HloInstruction) -> None:
        self._cache.pop(instr, None)

    def cached(self, instr: HloInstruction) -> InstrCost | None:
        """The figures of `instr` if computed (nothing is computed)."""
        return self._cache.get(instr)

    def seed(self, fusion: HloInstruction, cost: InstrCost | None) -> bool:
        """Take `cost` as `fusion`'s figures (computed from its parts after a fusion step,
        `moved_fusion_cost`); None, where that shortcut did not apply, leaves it to a whole walk."""
        if cost is None:
            return False
        self._cache[fusion] = cost
        self._fusion_of[fusion.fused_computation()] = fusion
        return True

    def flop_count(self, instr: HloInstruction) -> int:
        return int(self.cost(instr).flops)

    def bytes_accessed(self, instr: HloInstruction) -> int:
        return int(self.cost(instr).bytes_accessed)

    def output_bytes_accessed(self, instr: HloInstruction) -> int:
        return self.cost(instr).output_bytes

    def operand_bytes_accessed(self, instr: HloInstruction, index: int) -> int:
        return self.cost(instr).operand_bytes[index]

    def operand_utilization(self, instr: HloInstruction, index: int) -> float:
        return self.cost(instr).operand_util[index]

    def ir_size(self, instr: HloInstruction) -> float:
        """IR size of an instruction; of a fused instruction, how often it is emitted."""
        fusion = self._fusion_of.get(instr.parent)
        if fusion is None and instr.parent is not None and instr.parent.parent is not None \
                and not instr.parent.is_entry:
            fusion = self._find_fusion(instr.parent)
        if fusion is not None:
            return self.cost(fusion).fused.ir.get(instr, 0.0)
        return self.cost(instr).ir_size

    def _find_fusion(self, comp: HloComputation) -> HloInstruction | None:
        """The fusion instruction calling `comp` (a module scan, only for IR-size queries of a
        fused instruction before its fusion was costed)."""
        for c in comp.parent.computations:
            for i in c.instructions:
                if i.opcode == "fusion" and i.fused_computation() is comp:
                    self.cost(i)
                    return i
        return None

    def common_elementwise_utilization(self, fusion: HloInstruction, a: HloInstruction,
                                       b: HloInstruction) -> float:
        """Sum of the utilizations of the use roots `a` and `b` (fused instructions of
        `fusion`) share (XLA's CommonElementwiseUtilization)."""
        fused = self.cost(fusion).fused
        rb = fused.eroots.get(b, {})
        return sum(fused.root_util[r] for r in fused.eroots.get(a, {}) if r in rb)

    def merged_ir_size(self, producer: HloInstruction, consumer: HloInstruction) -> float:
        """IR(producer) x (times the consumer emits it) + IR(consumer): the IR estimate of
        `producer` fused into `consumer`."""
        replication = 1.0
        if consumer.opcode == "fusion":
            fused = self.cost(consumer).fused
            comp = consumer.fused_computation()
            replication = 0.0
            for i, o in enumerate(consumer.operands):
                if o is producer:
                    replication += fused.ir.get(comp.parameter(i), 0.0)
        return self.cost(producer).ir_size * replication + self.cost(consumer).ir_size

    def producer_consumer_merged_too_large(self, producer: HloInstruction, consumer: HloInstruction) -> bool:
        """The merged IR estimate is over 10000 (XLA's ProducerConsumerMergedTooLarge; the one IR-size
        check of the fusion passes)."""
        return self.merged_ir_size(producer, consumer) > MAX_IR_SIZE

    # -- per-op rules ----------------------------------------------------------------------------
    def _elementwise_flops(self, opcode: str, shape: Shape) -> float:
        shape = _first_array(shape)
        per = self.profile.get((opcode, shape.element_type.name), DEFAULT_FLOPS_PER_ELEMENT)
        return per * shape.num_elements

    def _computation_flops(self, comp: HloComputation) -> float:
        """Flops of one application of a scalar computation (a reducer)."""
        f = self._scalar_flops.get(comp)
        if f is None:
            f = 0.0
            for i in comp.instructions:
                if _is_elementwise(i) and i.opcode != "bitcast":
                    f += self._elementwise_flops(i.opcode, i.shape)
                elif i.opcode not in _NO_BYTES and i.opcode not in ("tuple",):
                    f += self._op_cost(i).flops
            self._scalar_flops[comp] = f
        return f

    def _op_cost(self, instr: HloInstruction) -> InstrCost:
        n = len(instr.operands)
        if instr.opcode in _NO_BYTES:
            return InstrCost(0.0, 0, [0] * n, [1.0] * n)
        fig = _OpFigures(instr)
        if _is_elementwise(instr):
            if instr.opcode not in ("copy", "bitcast"):
                fig.flops = self._elementwise_flops(instr.opcode, instr.shape)
        else:
            rule = _OP_RULES.get(instr.opcode)
            if rule is not None:
                rule(self, instr, fig)
        return InstrCost(fig.flops, fig.out, fig.obytes, fig.util)

    # -- fusions ---------------------------------------------------------------------------------
    def _fusion_cost(self, fusion: HloInstruction) -> InstrCost:
        comp = fusion.fused_computation()
        self._fusion_of[comp] = fusion
        order = list(reversed(comp.post_order()))
        fc, flops, ir_total = _fusion_utilizations(order, comp.root, {i: self._op_cost(i) for i in order})
        obytes = []
        outil = []
        for p in comp.parameters:
            u = fc.util.get(p, 0.0)
            if not self.count_multiple_input_accesses:
                u = min(u, 1.0)
            obytes.append(round(shape_bytes(p.shape) * u))
            outil.append(fc.util.get(p, 0.0))
        consts = sum(shape_bytes(i.shape) for i in order
                     if i.opcode == "constant" and i.shape.is_array and i.shape.num_elements > 1)
        return InstrCost(flops, _fusion_output_bytes(comp.root), obytes, outil, consts, ir_total, fc)


def _fusion_utilizations(order: list[HloInstruction], root: HloInstruction,
                         local: dict[HloInstruction, InstrCost], seed=None) -> tuple[FusedCost, float, float]:
    """XLA's FusionCalculateUtilizations over a fused computation in reverse post order: from
    the root (utilization 1, emitted once) towards the parameters, elementwise users pass their
    use roots on, others multiply by their operand utilization (rounded up to whole elements).
    (per-instruction figures, flops, IR size). Operands outside `order` (a partial walk over the
    part of a fusion that is new, `moved_fusion_cost`) only collect what their users give;
    `seed(fc)`, when given, sets what such a walk's first nodes receive from the part above."""
    fc = FusedCost()
    fc.root = root
    util, ir, eroots, root_util, root_ir = fc.util, fc.ir, fc.eroots, fc.root_util, fc.root_ir
    for i in order:
        util[i] = ir[i] = root_util[i] = 0.0
        eroots[i] = {}
    root_util[root] = root_ir[root] = 1.0
    eroots.setdefault(root, {})[root] = None
    if seed is not None:
        seed(fc)
    # a root dynamic-update-slice (or one per output) is in place: operand 0 is not read
    in_place = {r for r in (root.operands if root.opcode == "tuple" else [root])
                if r.opcode == "dynamic-update-slice"}
    flops = ir_total = 0.0
    for i in order:
        u = t = 0.0
        for r in eroots[i]:
            u += root_util[r]
            t += root_ir.get(r, 0.0)
        util[i], ir[i] = u, t
        flops += u * local[i].flops
        ir_total += t
        elementwise = _is_elementwise(i) or i.opcode in ("tuple", "get-tuple-element")
        for k, o in enumerate(i.operands):
            found = eroots.get(o)
            if found is None:
                found = eroots[o] = {}
            if elementwise:
                found.update(eroots[i])
                continue
            found[o] = None
            ou = u * (0.0 if (i in in_place and k == 0) else local[i].operand_util[k])
            n_el = leaf_elements(o.shape)
            ou = 0.0 if n_el == 0 else math.ceil(round(ou * n_el, 6)) / n_el
            root_util[o] = root_util.get(o, 0.0) + ou
            root_ir[o] = root_ir.get(o, 0.0) + t
    return fc, flops, ir_total


def _fusion_output_bytes(root: HloInstruction) -> int:
    """Bytes a fusion writes: each output whole, a root dynamic-update-slice only its update."""
    if root.opcode != "tuple" and root.shape.is_tuple:
        return shape_bytes(root.shape)
    leaves = list(root.operands) if root.opcode == "tuple" else [root]
    return sum(shape_bytes(leaf.operands[1].shape if leaf.opcode == "dynamic-update-slice" else leaf.shape)
               for leaf in leaves)


class _OpFigures:
    """The figures of one op while its rule fills them in: every operand read whole once and the
    output written whole, no flops, until the rule says otherwise."""

    __slots__ = ("flops", "out", "obytes", "util")

    def __init__(self, instr: HloInstruction):
        self.flops = 0.0
        self.out = shape_bytes(instr.shape)
        self.obytes = [shape_bytes(o.shape) for o in instr.operands]
        self.util = [1.0] * len(instr.operands)


def _broadcast(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    operand = instr.operands[0]
    if ca.count_multiple_input_accesses and operand.shape.num_elements:
        fig.util[0] = instr.shape.num_elements / operand.shape.num_elements
        fig.obytes[0] = round(fig.obytes[0] * fig.util[0])


def _reduce(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    ops, n = instr.operands, len(instr.operands)
    out_el = _first_array(instr.shape).num_elements
    reduced = _first_array(ops[0].shape).num_elements - out_el
    fig.flops = reduced * ca._computation_flops(instr.attrs["to_apply"])
    for i in range(n // 2, n):  # init values: read once per output element
        fig.obytes[i] = out_el * shape_bytes(ops[i].shape)
        fig.util[i] = float(out_el)


def _reduce_window(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    ops = instr.operands
    window = instr.attrs.get("window")
    wsize = math.prod(d.size for d in window.dims) if window is not None else 1
    out_el = _first_array(instr.shape).num_elements
    fig.flops = out_el * (wsize - 1) * ca._computation_flops(instr.attrs["to_apply"])
    for i in range(len(ops) // 2):
        in_el = ops[i].shape.num_elements
        fig.obytes[i] = out_el * wsize * ops[i].shape.element_type.byte_size
        fig.util[i] = out_el * wsize / in_el if in_el else 0.0


def _slicing(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    """slice, dynamic-slice, gather: operand 0 read as much as the output."""
    in_el = instr.operands[0].shape.num_elements
    fig.obytes[0] = shape_bytes(instr.shape)
    fig.util[0] = instr.shape.num_elements / in_el if in_el else 0.0


def _dynamic_update_slice(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    """In place: operand 0 is not read, only the update is written."""
    update = instr.operands[1].shape
    out_el = instr.shape.num_elements
    fig.obytes[0] = 0
    fig.util[0] = (out_el - update.num_elements) / out_el if out_el else 0.0
    fig.out = shape_bytes(update)


def _scatter(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    ops = instr.operands
    k = (len(ops) - 1) // 2
    updates = ops[k + 1:]
    for i in range(k):
        fig.obytes[i] = shape_bytes(updates[i].shape)
        in_el = ops[i].shape.num_elements
        fig.util[i] = updates[i].shape.num_elements / in_el if in_el else 0.0
    fig.out = sum(shape_bytes(u.shape) for u in updates)
    fig.flops = updates[0].shape.num_elements * ca._computation_flops(instr.attrs["to_apply"])


def _concatenate(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    # a compare and a branch per element; 400 when operand 0 ends off a warp boundary along a
    # non-major concatenated dim (XLA's tuned warp-divergence penalty)
    dim = instr.attrs["dimensions"][0]
    misaligned = dim > 0 and instr.operands[0].shape.dims[dim] & (WARP - 1)
    per_element = CONCAT_MISALIGNED_FLOPS_PER_ELEMENT if misaligned else CONCAT_FLOPS_PER_ELEMENT
    fig.flops = per_element * instr.shape.num_elements


def _dot(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    lhs = instr.operands[0].shape
    contracting = math.prod(lhs.dims[d] for d in instr.attrs.get("lhs_contracting_dims", ()))
    fig.flops = 2 * _first_array(instr.shape).num_elements * contracting


def _convolution(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    rhs = instr.operands[1].shape
    out_features = _conv_output_features(rhs, instr.attrs.get("dim_labels"))
    fig.flops = 2 * _first_array(instr.shape).num_elements * (rhs.num_elements // max(out_features, 1))


def _sort(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    n_el = _first_array(instr.operands[0].shape).num_elements
    fig.flops = n_el * max(1, math.ceil(math.log2(max(n_el, 2))))


def _custom_call(ca: GpuHloCostAnalysis, instr: HloInstruction, fig: _OpFigures) -> None:
    """A cuBLAS / cuDNN call writes its result, not its workspace (the tuple's second leaf)."""
    target = instr.attrs.get("custom_call_target", "")
    target = getattr(target, "value", target)
    if isinstance(target, str) and target.startswith(("__cublas", "__cudnn")) and instr.shape.is_tuple:
        fig.out = shape_bytes(instr.shape.tuple_shapes[0])


# The per-op rules of HloCostAnalysis / GpuHloCostAnalysis for non-elementwise ops (see the module
# docstring); an op without one reads its operands and writes its output once, with no flops.
_OP_RULES = {
    "broadcast": _broadcast, "reduce": _reduce, "reduce-window": _reduce_window, "slice": _slicing,
    "dynamic-slice": _slicing, "gather": _slicing, "dynamic-update-slice": _dynamic_update_slice,
    "scatter": _scatter, "concatenate": _concatenate, "dot": _dot, "convolution": _convolution,
    "sort": _sort, "custom-call": _custom_call,
}


def _conv_output_features(rhs: Shape, labels) -> int:
    """The kernel's output-feature dimension size (from the convolution's dim_labels)."""
    dim = getattr(labels, "kernel_output_feature", None)
    if dim is None:
        return rhs.dims[-1] if rhs.rank else 1
    return rhs.dims[dim]
