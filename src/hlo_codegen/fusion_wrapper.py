"""What each top-level instruction becomes at run time, and XLA's FusionWrapper.

Where it sits: the first step of hlo-codegen (`compiler.compile_module`), before copy insertion and
buffer assignment. Emitters only take fusions, so a lone instruction that needs a kernel (an
unfused `add`, a `reduce`, a `sort`, ...) is wrapped into a single-instruction kLoop fusion, as
XLA's `FusionWrapper` does at the end of its GPU pipeline:

    %a = f32[8] add(%p, %q)
      =>  %wrapped_add = f32[8] fusion(%p, %q), kind=kLoop, calls=%wrapped_add_computation
          %wrapped_add_computation { %param_0 = ... ROOT %add = f32[8] add(%param_0, %param_1) }

`classify(instr)` is the one table the wrapper and the thunk emitter share (`ThunkKind`):
no thunk (parameter, constant, tuple, get-tuple-element, bitcast, ...), control flow (while,
conditional, call), a library GEMM (`__cublas$gemm` custom calls; plain dots cuBLAS can do), a
memcpy (a copy, reshape, transpose or bitcast-convert that leaves the bytes as they are), a
memzero (replica-id / partition-id on one device), the random-number state
(rng-get-and-update-state), a collective or async copy (copies and memsets
on one device, `collectives`), an existing fusion, a kernel (everything else), or unsupported
(infeed, send, other custom calls, ...).
The wrapper works on codegen's own module (parsed from its input), never on hlo-opt's.
"""

from __future__ import annotations

from enum import Enum

from hlo_common.errors import HloError
from hlo_common.ir import HloComputation, HloInstruction, HloModule
from hlo_common.shape import Shape

from hlo_codegen.collectives import COLLECTIVES
from hlo_codegen.gemm_config import GEMM_CUSTOM_CALL_TARGETS, gemm_config_for_dot


class ThunkKind(Enum):
    NONE = "none"
    CONTROL_FLOW = "control-flow"
    GEMM = "gemm"
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
CONTROL_FLOW = frozenset({"while", "conditional", "call"})
SINGLE_DEVICE_ZERO = frozenset({"replica-id", "partition-id"})
# Custom calls that only annotate (sharding, memory space, layout): their operand passes through.
ANNOTATION_TARGETS = frozenset({
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
    "MoveToHost", "MoveToDevice", "LayoutConstraint", "Pin", "Unpin",
})
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


def physical_order(shape: Shape) -> list[int]:
    """The non-degenerate dimensions of an array shape, major to minor in memory."""
    return [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]


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


# -- the wrapper ------------------------------------------------------------------------------------
def global_computations(module: HloModule) -> list[HloComputation]:
    """The entry and every computation it runs as control flow (while, conditional, call)."""
    out: list[HloComputation] = []
    seen: set[int] = set()
    work = [module.entry]
    while work:
        comp = work.pop()
        if id(comp) in seen:
            continue
        seen.add(id(comp))
        out.append(comp)
        for instr in comp.instructions:
            if instr.opcode in CONTROL_FLOW:
                work.extend(reversed(instr.called_computations()))
    return out


def calls_for_decompositions(module: HloModule) -> int:
    """`xla_builder.*` custom calls become `call`s of their decomposition: the called computation
    they carry, or for `xla_builder.math.*` calls without one the computation XLA's builder library
    would attach (`hlo_common.xla_builder_math`, which the interpreter evaluates too); returns how
    many."""
    count = 0
    for comp in global_computations(module):
        for instr in list(comp.instructions):
            target = str(instr.attrs.get("custom_call_target", ""))
            if instr.opcode != "custom-call" or not target.startswith("xla_builder."):
                continue
            callees = instr.called_computations() or _library_decomposition(module, comp, instr)
            if len(callees) != 1:
                continue
            call = HloInstruction(instr.name, "call", instr.shape, list(instr.operands),
                                  {"to_apply": callees[0]})
            call.metadata = list(instr.metadata)
            comp.replace_instruction(instr, call, remove_dead_operands=False)
            call.name = instr.name  # free again now that the custom call is gone
            count += 1
    return count


def _library_decomposition(module: HloModule, comp: HloComputation, instr: HloInstruction) -> list:
    from hlo_common.xla_builder_math import decomposition_for

    shared = decomposition_for(instr)
    if shared is None:
        return []
    callee = shared.clone(name=module.unique_computation_name(str(instr.attrs["custom_call_target"])))
    module.computations.insert(module.computations.index(comp), callee)
    callee.parent = module
    return [callee]


def calls_for_async_ops(module: HloModule) -> int:
    """`async-done(async-start(x...), calls=c)` becomes `call(x..., to_apply=c)`: on one stream an
    asynchronous computation simply runs in order (async-updates in between are dropped)."""
    count = 0
    for comp in global_computations(module):
        for done in [i for i in comp.instructions if i.opcode == "async-done"]:
            start = done.operands[0]
            while start.opcode == "async-update" and len(start.users) == 1:
                start = start.operands[0]
            callee = start.attrs.get("calls")
            if (start.opcode != "async-start" or callee is None or isinstance(callee, list)
                    or len(start.users) != 1):
                continue
            call = HloInstruction(done.name, "call", done.shape, list(start.operands), {"to_apply": callee})
            call.metadata = list(done.metadata)
            chain = done.operands[0]
            comp.replace_instruction(done, call, remove_dead_operands=False)
            call.name = done.name
            while chain is not start:
                nxt = chain.operands[0]
                comp.remove_instruction(chain)
                chain = nxt
            comp.remove_instruction(start)
            count += 1
    return count


def wrap_lone_instructions(module: HloModule) -> list[HloInstruction]:
    """FusionWrapper: put every instruction classified KERNEL into its own kLoop fusion.
    Returns the new fusions; raises HloError naming an instruction nothing can run."""
    wrapped = []
    for comp in global_computations(module):
        for instr in list(comp.instructions):
            kind = classify(instr)
            if kind is ThunkKind.UNSUPPORTED:
                what = instr.attrs.get("custom_call_target") if instr.opcode == "custom-call" else None
                detail = f" (custom_call_target=\"{what}\")" if what else ""
                raise HloError(f"%{instr.name}: {instr.opcode}{detail} is not supported by hlo-codegen "
                               f"(in computation {comp.name})")
            if kind is ThunkKind.KERNEL:
                wrapped.append(_wrap(module, comp, instr))
    return wrapped


def _wrap(module: HloModule, comp: HloComputation, instr: HloInstruction) -> HloInstruction:
    body = HloComputation(module.unique_computation_name(f"wrapped_{instr.opcode}_computation"))
    params = []
    for i, operand in enumerate(instr.operands):
        p = HloInstruction(f"param_{i}", "parameter", operand.shape)
        p.parameter_number = i
        params.append(body.add_instruction(p))
    inner = instr.clone(new_operands=params, name=instr.name)
    body.add_instruction(inner)
    body.root = inner
    module.computations.insert(module.computations.index(comp), body)
    body.parent = module
    fusion = HloInstruction(comp.unique_name(f"wrapped_{instr.opcode}"), "fusion", instr.shape,
                            list(instr.operands), {"kind": "kLoop", "calls": body})
    fusion.metadata = list(instr.metadata)
    # The fusion takes the old instruction's place in the list, so a schedule stays valid.
    comp.replace_instruction(instr, fusion, remove_dead_operands=False)
    return fusion
