"""What every fusion emitter shares: roots, kernel names, kernel parameters, hero analysis.

Where it sits: emitters/loop.py (and the reduction/transpose/... emitters that follow) subclass
`KernelEmitter`; emitters/__init__.py picks one per fusion with `emitter_kind`.

Kernel parameters are the fusion's operands in order, then its outputs (the leaves of its
shape), each a flat 1-D buffer of the element type in physical (layout) order. `argument_ids`
(one hashable per operand and output, e.g. a buffer slice) merges parameters that are the same
buffer into one kernel parameter, in first-occurrence order - an in-place op reads and writes
the same pointer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Hashable, Sequence

from hlo_codegen.emitters.launch import H100, GpuDeviceInfo
from hlo_common.gpu import ir_emission_utils, reduction_utils
from hlo_codegen.indexing import LaunchDimensions
from hlo_codegen.kernel_ir.ir import Buffer, Kernel
from hlo_codegen.partitioner import sanitize_name
from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.gpu.ir_emission_utils import fusion_roots  # noqa: F401  (re-exported)
from hlo_common.hlo.shape import Shape

_GENERIC_NAME = re.compile(r"^(fusion|wrapped_\w+)(\.\d+)?$")


class EmitterError(HloError):
    """A fusion no emitter can generate (names the fusion and the reason)."""


def output_shapes(fusion: HloInstruction) -> list[Shape]:
    return [s for _, s in fusion.shape.leaf_shapes()]


def kernel_name(fusion: HloInstruction, kind: str = "loop") -> str:
    """The fusion's sanitized name; generic names (`fusion.3`) become `<kind>_<root ops>_fusion`."""
    if not _GENERIC_NAME.match(fusion.name):
        return sanitize_name(fusion.name)
    ops = []
    for r in fusion_roots(fusion):
        name = r.opcode.replace("-", "_")
        if name not in ops:
            ops.append(name)
    return sanitize_name(f"{kind}_{'_'.join(ops)}_fusion")


@dataclass
class KernelParams:
    """Buffer names for each fused parameter and each output leaf, after deduplication."""

    param_buffers: dict[int, str] = field(default_factory=dict)
    output_buffers: list[str] = field(default_factory=list)


def _is_packed(shape: Shape) -> bool:
    et = shape.element_type
    layout = shape.layout
    return et.bits < 8 and not et.is_pred and layout is not None and 0 < layout.element_size_in_bits < 8


def add_kernel_params(kernel: Kernel, fusion: HloInstruction,
                      argument_ids: Sequence[Hashable] | None = None) -> KernelParams:
    """Create the kernel's parameter buffers (operands, then outputs; merged by argument id)."""
    shapes = [op.shape for op in fusion.operands] + output_shapes(fusion)
    written = [False] * len(fusion.operands) + [True] * (len(shapes) - len(fusion.operands))
    ids = list(argument_ids) if argument_ids is not None else list(range(len(shapes)))
    if len(ids) != len(shapes):
        raise EmitterError(f"%{fusion.name}: {len(ids)} argument ids for {len(shapes)} kernel arguments")
    by_id: dict[Hashable, Buffer] = {}
    names = []
    for shape, arg_id, w in zip(shapes, ids, written):
        if shape.is_tuple or not shape.is_array:
            raise EmitterError(f"%{fusion.name}: kernel arguments must be arrays, not {shape}")
        b = by_id.get(arg_id)
        if b is None:
            b = Buffer(f"arg{len(by_id)}", "param", shape.element_type.name, shape.num_elements,
                       packed=_is_packed(shape))
            by_id[arg_id] = b
            kernel.buffers.append(b)
        elif b.num_elements != shape.num_elements or b.hlo_type != shape.element_type.name:
            raise EmitterError(f"%{fusion.name}: arguments with id {arg_id!r} have different shapes")
        b.written |= w
        names.append(b.name)
    n = len(fusion.operands)
    return KernelParams(dict(enumerate(names[:n])), names[n:])


class KernelEmitter:
    """Base of the fusion emitters: `launch_dimensions()` and `emit(argument_ids) -> Kernel`."""

    kind = "base"

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        self.fusion = fusion
        self.device = device
        self.computation: HloComputation = fusion.fused_computation()

    def launch_dimensions(self) -> LaunchDimensions:
        raise NotImplementedError

    def emit(self, argument_ids: Sequence[Hashable] | None = None) -> Kernel:
        raise NotImplementedError

    def new_kernel(self) -> Kernel:
        launch = self.launch_dimensions()
        return Kernel(kernel_name(self.fusion, self.kind), launch.blocks_xyz(), launch.threads_xyz())


# -- heroes (the facts live in hlo_common.gpu, shared with hlo-opt's cost model) ----------------------
def find_hero(root: HloInstruction) -> HloInstruction:
    """The op that shapes codegen for a fusion root (XLA's FindNonTrivialHero)."""
    return ir_emission_utils.find_non_trivial_hero(root)


def reduction_dimensions(reduce: HloInstruction) -> tuple[bool, list[int]]:
    """(is_row_reduction, [a, b, c]) of the reduce's input collapsed in physical order (XLA's
    GetReductionKindAndContiguousComponents): row = [batch, kept, minor reduced], column =
    [major kept, reduced, minor kept]."""
    rd = reduction_utils.reduction_dimensions(reduce)
    return rd.is_row, list(rd.dims)


def is_real_reduction_hero(reduce: HloInstruction, device: GpuDeviceInfo = H100,
                           root: HloInstruction | None = None) -> bool:
    """A reduce the reduction emitter handles better than elemental code (XLA's
    IsRealReductionHero; `root` defaults to the reduce itself)."""
    return reduction_utils.is_real_reduction_hero(reduce if root is None else root, reduce,
                                                  device.threads_per_warp)


def wrap_computation_in_fusion(module: HloModule, computation: HloComputation,
                               kind: str = "kLoop") -> HloInstruction:
    """A fusion instruction calling `computation`, in a fresh entry computation of `module`
    (for test files that hold only a fused computation, as XLA's `*_fusion_to_mlir` tools accept)."""
    entry = HloComputation(module.unique_computation_name("main"))
    params = []
    for p in computation.parameters:
        param = HloInstruction(f"p{p.parameter_number}", "parameter", p.shape)
        param.parameter_number = p.parameter_number
        entry.add_instruction(param)
        params.append(param)
    fusion = HloInstruction("fusion", "fusion", computation.root.shape, params,
                            {"kind": kind, "calls": computation})
    entry.add_instruction(fusion)
    entry.root = fusion
    computation.is_entry = False
    if module.entry is computation:
        module.entry = None
    module.add_computation(entry, entry=True)
    return fusion
