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
from hlo_codegen.indexing import LaunchDimensions
from hlo_codegen.kernel_ir.ir import Buffer, Kernel
from hlo_codegen.partitioner import sanitize_name
from hlo_common.errors import HloError
from hlo_common.ir import HloComputation, HloInstruction, HloModule
from hlo_common.shape import Shape

_GENERIC_NAME = re.compile(r"^(fusion|wrapped_\w+)(\.\d+)?$")


class EmitterError(HloError):
    """A fusion no emitter can generate (names the fusion and the reason)."""


def fusion_roots(fusion: HloInstruction) -> list[HloInstruction]:
    """The instructions computing the fusion's outputs (operands of a root tuple)."""
    root = fusion.fused_computation().root
    return list(root.operands) if root.opcode == "tuple" else [root]


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


# -- heroes --------------------------------------------------------------------------------------------
_INTERMEDIATE = ("bitcast", "reshape", "copy", "convert", "negate", "abs", "exponential", "log",
                 "sqrt", "rsqrt", "tanh", "logistic", "sign", "not", "reduce-precision")


def find_hero(root: HloInstruction) -> HloInstruction:
    """Walk up from a root through single-operand intermediates to the op that shapes codegen."""
    hero = root
    while hero.opcode in _INTERMEDIATE and len(hero.operands) == 1 and len(hero.operands[0].users) == 1 \
            and hero.operands[0].opcode != "parameter":
        hero = hero.operands[0]
    return hero


def reduction_dimensions(reduce: HloInstruction) -> tuple[bool, list[int]]:
    """(is_row_reduction, [a, b, c]) of the reduce's input collapsed in physical order (XLA's
    GetReductionKindAndContiguousComponents): row = [batch, kept, minor reduced], column =
    [major kept, reduced, minor kept]."""
    shape = reduce.operands[0].shape
    reduced = set(reduce.attrs["dimensions"])
    groups: list[list] = []  # [is_reduced, size], major to minor, size-1 dims dropped
    for d in reversed(shape.minor_to_major):
        if shape.dims[d] == 1:
            continue
        r = d in reduced
        if groups and groups[-1][0] == r:
            groups[-1][1] *= shape.dims[d]
        else:
            groups.append([r, shape.dims[d]])
    if not groups or all(g[0] for g in groups):
        return True, [1, 1, shape.num_elements]
    if groups[-1][0]:  # minor dims are reduced
        sizes = [g[1] for g in groups]
        if len(groups) == 2:
            sizes = [1] + sizes
        return True, (sizes + [1, 1, 1])[:3]
    sizes = [g[1] for g in groups]
    if len(groups) == 1:
        sizes = [1, 1] + sizes
    elif len(groups) == 2:
        sizes = [1] + sizes
    return False, (sizes + [1, 1, 1])[:3]


def _consecutive(shape: Shape, dims: set[int]) -> bool:
    order = [d for d in reversed(shape.minor_to_major) if d in dims]
    positions = [list(reversed(shape.minor_to_major)).index(d) for d in order]
    return not positions or positions == list(range(positions[0], positions[0] + len(positions)))


def is_real_reduction_hero(reduce: HloInstruction, device: GpuDeviceInfo = H100) -> bool:
    """A reduce the reduction emitter handles better than elemental code (XLA's
    IsReductionFromOrToContiguousDimensions + IsUnnestedReductionFasterThanElemental)."""
    if reduce.opcode != "reduce":
        return False
    shape = reduce.operands[0].shape
    reduced = set(reduce.attrs["dimensions"])
    kept = set(range(shape.rank)) - reduced
    if not (_consecutive(shape, kept) or _consecutive(shape, reduced)):
        return False
    is_row, dims = reduction_dimensions(reduce)
    warp = device.threads_per_warp
    if is_row:
        return dims[2] >= warp or warp % dims[2] == 0
    major, minor = dims[1], dims[2]
    return not (major < warp or (major < 2 * warp and minor < warp) or (major < 4 * warp and minor < 8)
                or (major < 8 * warp and minor < 3))


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
