"""What each top-level instruction becomes at run time, and which ones the fusion wrapper wraps.

Where it sits: hlo-codegen's prepare pipeline (`compiler.prepare_pipeline`) and its thunk emitter.
Emitters only take fusions, so a lone instruction that needs a kernel (an unfused `add`, a
`reduce`, a `sort`, ...) is wrapped into a single-instruction fusion by the shared
`fusion-wrapper` pass (`hlo_common.passes.fusion_wrapper`, XLA's FusionWrapper), which codegen
runs with `needs_kernel` as its rule instead of XLA's opcode list: codegen must also wrap what
XLA's list leaves to other emitters (sort, a copy that moves bytes), and must not wrap what runs
as a library call or a memcpy (a dot cuBLAS can do, a copy that keeps the bytes).

`classify(instr)` is the one table the wrapper rule and the thunk emitter share (`ThunkKind`):
no thunk (parameter, constant, tuple, get-tuple-element, bitcast, ...), control flow (while,
conditional, call), a library GEMM (`__cublas$gemm` custom calls; plain dots cuBLAS can do), a
cuDNN convolution (the `__cudnn$conv*` calls the cuda target keeps), a memcpy (a copy, reshape,
transpose or bitcast-convert that leaves the bytes as they are), a (replica-id / partition-id on one device), the random-number state
(rng-get-and-update-state), a collective or async copy (copies and memsets
on one device, `collectives`), an existing fusion, a kernel (everything else), or unsupported
(infeed, send, other custom calls, ...).
"""

from __future__ import annotations

from enum import Enum

from hlo_common.errors import HloError
from hlo_common.gpu.gemm_config import GEMM_CUSTOM_CALL_TARGETS, gemm_config_for_dot
from hlo_common.hlo.annotations import ANNOTATION_TARGETS
from hlo_common.hlo.ir import HloInstruction
from hlo_common.interpreter.cudnn_conv import CUDNN_CONV_TARGETS
from hlo_common.passes._support import CONTROL_FLOW, physical_order
from hlo_common.passes.single_device_collectives import COLLECTIVES
from hlo_common.hlo.shape import Shape


class ThunkKind(Enum):
    NONE = "none"
    CONTROL_FLOW = "control-flow"
    GEMM = "gemm"
    CUDNN_CONV = "cudnn-conv"
    COPY = "copy"
    MEMZERO = "memzero"
    RNG_STATE = "rng-state"
    COLLECTIVE = "collective"
    FUSION = "fusion"
    KERNEL = "kernel"
    UNSUPPORTED = "unsupported"


NO_THUNK = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "opt-barrier", "domain",
    "add-dependency", "after-all",
})
SINGLE_DEVICE_ZERO = frozenset({"replica-id", "partition-id"})
UNSUPPORTED = frozenset({
    "infeed", "outfeed", "send", "send-done", "recv", "recv-done", "ragged-all-to-all", "async-start",
    "async-update", "async-done", "get-dimension-size", "set-dimension-size",
})


def classify(instr: HloInstruction) -> ThunkKind:
    """What `instr` (of a global computation) turns into; see the module docstring."""
    op = instr.opcode
    if op in NO_THUNK:
        return ThunkKind.NONE
    if op in CONTROL_FLOW:
        return ThunkKind.CONTROL_FLOW
    if op == "fusion":
        return ThunkKind.FUSION
    if op == "custom-call":
        target = instr.attrs.get("custom_call_target")
        if target in GEMM_CUSTOM_CALL_TARGETS:
            return ThunkKind.GEMM
        if target in CUDNN_CONV_TARGETS:  # only the cuda target keeps them (cudnn-conv-fallback)
            return ThunkKind.CUDNN_CONV
        if target in ANNOTATION_TARGETS and _returns_its_operand(instr):
            return ThunkKind.COPY
        return ThunkKind.UNSUPPORTED
    if op == "dot":
        return ThunkKind.GEMM if gemm_config_for_dot(instr) is not None else ThunkKind.KERNEL
    if op == "rng-get-and-update-state":
        return ThunkKind.RNG_STATE
    if op == "copy" and instr.shape.is_tuple:
        return ThunkKind.NONE  # a tuple copy only makes a new index table; the leaves are forwarded
    if op in COLLECTIVES:
        return ThunkKind.COLLECTIVE
    if op in UNSUPPORTED or op in SINGLE_DEVICE_ZERO:
        return _single_device(instr)
    if is_memcpy(instr):
        return ThunkKind.COPY
    return ThunkKind.KERNEL


def _returns_its_operand(instr: HloInstruction) -> bool:
    return (len(instr.operands) == 1 and instr.shape.is_array
            and instr.operands[0].shape.to_string() == instr.shape.to_string())


def _single_device(instr: HloInstruction) -> ThunkKind:
    op = instr.opcode
    if op in SINGLE_DEVICE_ZERO and instr.shape.is_array:
        return ThunkKind.MEMZERO
    return ThunkKind.UNSUPPORTED


def is_memcpy(instr: HloInstruction) -> bool:
    """True when the instruction's output bytes equal its operand's bytes (a plain copy does)."""
    if len(instr.operands) != 1 or not instr.shape.is_array:
        return False
    src, dst = instr.operands[0].shape, instr.shape
    if not src.is_array:
        return False
    if _has_layout_extras(src) or _has_layout_extras(dst):
        return False
    op = instr.opcode
    if op in ("copy", "bitcast-convert"):
        return (src.element_type.bits == dst.element_type.bits and src.dims == dst.dims
                and physical_order(src) == physical_order(dst)
                and (op == "bitcast-convert" or src.element_type is dst.element_type))
    if op == "reshape":
        return (src.element_type is dst.element_type and src.layout is not None and dst.layout is not None
                and _is_row_major(src) and _is_row_major(dst))
    if op == "transpose":
        perm = list(instr.attrs.get("dimensions", ()))
        return (src.element_type is dst.element_type
                and [perm[d] for d in physical_order(dst)] == physical_order(src))
    return False


def _is_row_major(shape: Shape) -> bool:
    order = physical_order(shape)
    return order == sorted(order)


def _has_layout_extras(shape: Shape) -> bool:
    return shape.layout is not None and bool(shape.layout.extras)


def needs_kernel(instr: HloInstruction) -> bool:
    """The fusion wrapper's rule in hlo-codegen: wrap what `classify` calls a KERNEL; an
    instruction nothing can run is an HloError naming it."""
    kind = classify(instr)
    if kind is ThunkKind.UNSUPPORTED:
        what = instr.attrs.get("custom_call_target") if instr.opcode == "custom-call" else None
        detail = f" (custom_call_target=\"{what}\")" if what else ""
        where = f" (in computation {instr.parent.name})" if instr.parent is not None else ""
        raise HloError(f"%{instr.name}: {instr.opcode}{detail} is not supported by hlo-codegen{where}")
    return kind is ThunkKind.KERNEL
