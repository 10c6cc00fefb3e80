"""ThunkEmitter: the instructions of the global computations -> the manifest's thunk tree.

Where it sits: hlo-codegen, after fusion wrapping, copy insertion and buffer assignment (XLA's
`ThunkEmitter::EmitHloInstruction`, `xla/service/gpu/thunk_emitter.cc`). Each instruction of a
global computation, in schedule order (the buffer assignment's order), becomes zero or more
thunks, by the kind `fusion_wrapper.classify` gives it:

    fusion             KernelThunk(s) from the kernel backend; a broadcast of a constant is a
                       MemsetThunk, a fusion that only forwards a parameter's bytes a CopyThunk;
                       for the host target a lone convolution (`wrapped_convolution`) is a
                       ConvolutionThunk, a library call, as XLA:GPU calls cuDNN, and a Triton
                       GEMM fusion a GemmFusionThunk (its computation, evaluated with numpy);
                       for cuda a Triton GEMM fusion is a KernelThunk of a Triton kernel
                       (`triton_gemm.emitter`, all of a module's compiled up front in one batch)
    __cudnn$conv*      CudnnConvolutionThunk (cuda target only: the call's cuDNN graph, a slice per
                       graph tensor, the scratch buffer as workspace)
    dot / __cublas$*   GemmThunk (for the cuda target with the cuBLASLt epilogue cublasLtMatmul runs;
                       elsewhere gemm_fallback split such epilogues into a GEMM call + a fusion,
                       and made the calls cuBLAS cannot run fusions)
    copy (same bytes)  CopyThunk (nothing when source and destination are one slice)
    rng-get-and-update-state  RngGetAndUpdateStateThunk (XLA emits a load / add / store of its
                       `rng_state` global; here the runtime keeps the state)
    collectives        CopyThunk / MemsetThunk per result leaf on one device, nothing for a
                       *-done, whose leaves are its start's; on several a CollectiveThunk (and a
                       Done thunk for an async pair) (`collectives`)
    replica-id, partition-id   zeros on one device, a DeviceIdThunk (kReplicaId / kPartitionId)
                       on several
    while              WhileThunk(condition SequentialThunk, body SequentialThunk)
    conditional        ConditionalThunk(one SequentialThunk per branch)
    call               the callee's thunks, inline
    parameter, constant, tuple, get-tuple-element, bitcast, ...: nothing

Kernel arguments follow XLA's `KernelArguments`: the fusion's operands in order, then its
output leaves in order, each a slice of the buffer assignment; arguments that are the same slice
are passed once (the first occurrence; written when any occurrence is written). The kernel
backend (`KernelBackend`, `kernel_backend.EmitterBackend`) turns a fusion plus these arguments into
compiled kernels;
fusions that compute the same thing on the same shapes share one kernel (XLA's kernel reuse).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import hashlib
import re
from typing import Callable, Protocol

import numpy as np

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.printer import print_instruction
from hlo_common.manifest.collective_thunks import DeviceIdThunk
from hlo_common.manifest.manifest import ManifestKernel
from hlo_common.manifest.thunks import (
    BufferSlice, ConditionalThunk, ConvolutionConfig, ConvolutionThunk, CopyThunk, GemmFusionThunk, GemmThunk,
    KernelArgument,
    KernelThunk, MemsetThunk, RngGetAndUpdateStateThunk, SequentialThunk, Thunk, WhileThunk,
)

from hlo_codegen.buffer_assignment import BufferAssignment
from hlo_codegen.buffer_assignment.call_graph import instruction_sequence
from hlo_codegen.collectives import collective_thunks
from hlo_common.passes.single_device_collectives import module_devices
from hlo_common.passes.triton_gemm_fallback import is_triton_gemm_fusion
from hlo_codegen.fusion_wrapper import ThunkKind, classify, is_memcpy
from hlo_common.gpu.gemm_config import gemm_config_for_custom_call, gemm_config_for_dot, gemm_workspace_index


@dataclass(frozen=True)
class KernelArgumentSpec:
    """One deduplicated kernel parameter, with the fusion positions it stands for."""

    slice: BufferSlice
    shape: str
    written: bool
    operands: tuple[int, ...] = ()  # fusion operand numbers passed through this parameter
    outputs: tuple[tuple[int, ...], ...] = ()  # output shape indices written through it


@dataclass
class CompiledKernel:
    """What a kernel backend hands back for one kernel launch."""

    kernel: ManifestKernel  # name, launch dims, shared bytes, param count and code
    arg_indices: tuple[int, ...]  # which of the fusion's KernelArgumentSpecs, in parameter order
    artifacts: dict[str, str] = field(default_factory=dict)  # dump suffix -> text (kernel IR, .ll, .ptx)


KernelNamer = Callable[[str], str]


class KernelBackend(Protocol):
    def compile(self, fusion: HloInstruction, args: list[KernelArgumentSpec],
                unique_name: KernelNamer) -> list[CompiledKernel]:
        """Emit and lower the kernels of `fusion` (named through `unique_name(preferred)`, which
        keeps kernel names unique in the module); raise HloError naming the kernel on failure."""


def kernel_arguments(fusion: HloInstruction, ba: BufferAssignment) -> list[KernelArgumentSpec]:
    """XLA's KernelArguments: operands, then output leaves; one parameter per distinct slice."""
    order: list[BufferSlice] = []
    info: dict[BufferSlice, dict] = {}

    def add(s: BufferSlice, shape, written: bool, operand=None, output=None) -> None:
        entry = info.get(s)
        if entry is None:
            order.append(s)
            entry = info[s] = {"shape": shape.to_string(), "written": False, "operands": [], "outputs": []}
        entry["written"] |= written
        if operand is not None:
            entry["operands"].append(operand)
        if output is not None:
            entry["outputs"].append(output)

    for i, op in enumerate(fusion.operands):
        if not op.shape.is_array:
            raise HloError(f"%{fusion.name}: operand {i} (%{op.name}) is {op.shape}; kernels take arrays")
        add(_slice(ba, op, ()), op.shape, False, operand=i)
    for index, leaf in fusion.shape.leaf_shapes():
        if leaf.is_array:
            add(_slice(ba, fusion, index), leaf, True, output=index)
    return [KernelArgumentSpec(s, info[s]["shape"], info[s]["written"], tuple(info[s]["operands"]),
                               tuple(info[s]["outputs"])) for s in order]


def _slice(ba: BufferAssignment, instr: HloInstruction, index: tuple[int, ...] = ()) -> BufferSlice:
    s = ba.get_slice(instr, index)
    return BufferSlice(s.index, s.offset, s.size)


def sanitize_kernel_name(name: str) -> str:
    """A valid PTX / LLVM identifier from an HLO name (`add.3` -> `add_3`), as XLA does."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    if not any(c.isalnum() for c in out):
        return f"kernel{out}"  # PTX identifiers need a letter or digit after leading underscores
    return out if not out[0].isdigit() else f"_{out}"


class TritonRefusal(Exception):
    """Triton refused a kernel that a thunk tree emitted before its answer counts on: the module
    is emitted again, waiting for Triton first (`ThunkEmitter.emit_entry`)."""


class ThunkEmitter:
    """Builds the thunk tree of `module`; compiled kernels are collected in `kernels`."""

    def __init__(self, module: HloModule, assignment: BufferAssignment, backend: KernelBackend,
                 convolution_thunks: bool = False, gemm_fusion_thunks: bool = False, triton=None,
                 keep_collectives: bool = False):
        self.module = module
        self.keep_collectives = keep_collectives  # collective thunks on one device too (collectives.py)
        self.triton = triton  # a triton_gemm.emitter.TritonGemmEmitter: GEMM fusions as Triton kernels
        self._triton_thunks: dict[str, KernelThunk] = {}
        self.convolution_thunks = convolution_thunks  # lone convolutions as ConvolutionThunks
        self.gemm_fusion_thunks = gemm_fusion_thunks  # Triton GEMM fusions as GemmFusionThunks
        self.ba = assignment
        self.backend = backend
        self.kernels: dict[str, CompiledKernel] = {}
        self._kernel_names: set[str] = set()
        self._reuse: dict[str, list[CompiledKernel]] = {}

    def emit_entry(self, wait_for_triton: bool = False) -> SequentialThunk:
        """The entry computation's thunk tree. Every GEMM fusion the Triton writer takes is planned
        first and compiled in one batch, which runs in the Triton child while the other kernels
        are emitted (their thunks count on Triton's answer; `settle_thunks`). When Triton refuses
        a kernel, that is TritonRefusal: the caller emits again with `wait_for_triton`, which
        waits for the batch first, so that the refused fusions become loop kernels in place."""
        if self.triton is None:
            return self.emit_computation(self.module.entry)
        from hlo_codegen.triton_gemm.emitter import settle_thunks

        self._plan_triton_gemms()
        if wait_for_triton:
            kernels, self._triton_thunks = self.triton.finish()
            self._take_triton_kernels(kernels)
            return self.emit_computation(self.module.entry)
        self.triton.start()
        self._triton_thunks = self.triton.provisional_thunks()
        try:
            entry = self.emit_computation(self.module.entry)
        except BaseException:
            self.triton.cancel()  # no child left compiling behind an error
            raise
        kernels, final = self.triton.finish(say_refusals=False)
        entry = settle_thunks(entry, self._triton_thunks, final)
        self._take_triton_kernels(kernels)
        return entry

    def _plan_triton_gemms(self) -> None:
        from hlo_common.passes._support import global_computations

        slice_of = lambda instr: _slice(self.ba, instr)  # noqa: E731
        for comp in global_computations(self.module):
            for instr in instruction_sequence(comp, self.module.is_scheduled):
                if is_triton_gemm_fusion(instr) and instr.shape.is_array:
                    self.triton.plan(instr, slice_of, self._unique_kernel_name)

    def _take_triton_kernels(self, kernels: dict) -> None:
        """The Triton kernels, first in `kernels` (the manifest lists them before the others)."""
        triton = {name: CompiledKernel(kernel, (), artifacts) for name, (kernel, artifacts) in kernels.items()}
        self.kernels = {**triton, **self.kernels}

    def emit_computation(self, comp: HloComputation) -> SequentialThunk:
        thunks: list[Thunk] = []
        for instr in instruction_sequence(comp, self.module.is_scheduled):
            thunks.extend(self.emit(instr))
        return SequentialThunk(tuple(thunks), comp.name)

    def emit(self, instr: HloInstruction) -> list[Thunk]:
        kind = classify(instr)
        handler = _EMITTERS.get(kind)
        if handler is None:
            raise HloError(f"%{instr.name}: {instr.opcode} needs a kernel but was not wrapped into a fusion "
                           f"(in computation {instr.parent.name})")
        return handler(self, instr)

    # -- per kind -------------------------------------------------------------------------------
    def _nothing(self, instr: HloInstruction) -> list[Thunk]:
        return []

    def _control_flow(self, instr: HloInstruction) -> list[Thunk]:
        if instr.opcode == "call":
            return list(self.emit_computation(instr.attrs["to_apply"]).thunks)
        if instr.opcode == "while":
            cond, body = instr.attrs["condition"], instr.attrs["body"]
            return [WhileThunk(instr.name, _slice(self.ba, cond.root), self.emit_computation(cond),
                               self.emit_computation(body), _known_trip_count(instr))]
        index = instr.operands[0]
        if "branch_computations" in instr.attrs:
            branches = list(instr.attrs["branch_computations"])
        else:
            branches = [instr.attrs["true_computation"], instr.attrs["false_computation"]]
        return [ConditionalThunk(instr.name, _slice(self.ba, index), index.shape.element_type.is_pred,
                                 tuple(self.emit_computation(b) for b in branches))]

    def _gemm(self, instr: HloInstruction) -> list[Thunk]:
        if instr.opcode == "dot":
            config = gemm_config_for_dot(instr)
            ops = {"lhs": 0, "rhs": 1}
            out_index: tuple[int, ...] = ()
            workspace = None
        else:
            found = gemm_config_for_custom_call(instr, lt=True)  # an epilogue left here is cuBLASLt's
            if found is None:  # gemm_fallback lowers these to kernels before thunk emission
                raise HloError(f"%{instr.name}: cuBLAS cannot run this gemm and it was not lowered to a "
                               "kernel")
            config, ops = found
            out_index = (0,) if instr.shape.is_tuple else ()
            ws = gemm_workspace_index(instr)
            workspace = _slice(self.ba, instr, ws) if ws is not None else None
        slices = {role: _slice(self.ba, instr.operands[i]) for role, i in ops.items()}
        return [GemmThunk(instr.name, config, slices["lhs"], slices["rhs"], _slice(self.ba, instr, out_index),
                          slices.get("c"), slices.get("bias"), workspace)]

    def _cudnn_conv(self, instr: HloInstruction) -> list[Thunk]:
        """The CudnnConvolutionThunk of a `__cudnn$conv*` call cuDNN takes (see cudnn-conv-fallback)."""
        from hlo_common.gpu.cudnn_graph import describe_call
        from hlo_common.manifest.cudnn_thunks import CudnnConvolutionThunk

        graph = describe_call(instr)
        tensors = [d for _, d in graph.inputs] + [p.tensor for p in graph.pointwise if p.tensor is not None]
        buffers = {d.name: _slice(self.ba, instr.operands[d.operand]) for d in tensors}
        buffers[graph.output.name] = _slice(self.ba, instr, (0,) if instr.shape.is_tuple else ())
        scratch = len(instr.shape.tuple_shapes) > 1 and graph.workspace_bytes > 0
        workspace = _slice(self.ba, instr, (1,)) if scratch else None
        return [CudnnConvolutionThunk(instr.name, graph.to_json(), tuple(sorted(buffers.items())), workspace)]

    def _copy(self, instr: HloInstruction) -> list[Thunk]:
        src, dst = _slice(self.ba, instr.operands[0]), _slice(self.ba, instr)
        return [] if src == dst else [CopyThunk(instr.name, src, dst)]

    def _memzero(self, instr: HloInstruction) -> list[Thunk]:
        replicas, partitions = module_devices(self.module)
        if instr.opcode in ("replica-id", "partition-id") and replicas * partitions > 1:
            return [DeviceIdThunk(instr.name, instr.opcode.split("-")[0], _slice(self.ba, instr))]
        return [MemsetThunk(instr.name, _slice(self.ba, instr), 0)]

    def _rng_state(self, instr: HloInstruction) -> list[Thunk]:
        dst = _slice(self.ba, instr)
        if not instr.shape.is_array or dst.size != 16:
            raise HloError(f"%{instr.name}: rng-get-and-update-state returns the 128-bit state; "
                           f"{instr.shape} does not hold 16 bytes")
        return [RngGetAndUpdateStateThunk(instr.name, dst, int(instr.attrs.get("delta", 0)))]

    def _collective(self, instr: HloInstruction) -> list[Thunk]:
        slice_of = lambda i, index: _slice(self.ba, i, index)  # noqa: E731
        return collective_thunks(instr, slice_of, *module_devices(self.module), keep=self.keep_collectives)

    def _fusion(self, instr: HloInstruction) -> list[Thunk]:
        memset = _memset_value(instr)
        if memset is not None:
            return [MemsetThunk(instr.name, _slice(self.ba, instr), memset)]
        source = _memcpy_source(instr)
        if source is not None:
            src, dst = _slice(self.ba, instr.operands[source]), _slice(self.ba, instr)
            return [] if src == dst else [CopyThunk(instr.name, src, dst)]
        conv = _wrapped_convolution(instr) if self.convolution_thunks else None
        if conv is not None:
            return [self._convolution(instr, conv)]
        if self.gemm_fusion_thunks and is_triton_gemm_fusion(instr) and instr.shape.is_array:
            return [self._gemm_fusion(instr)]
        if instr.name in self._triton_thunks:
            return [self._triton_thunks[instr.name]]
        args = kernel_arguments(instr, self.ba)
        key = kernel_reuse_key(instr, args)
        compiled = self._reuse.get(key)
        if compiled is None:
            compiled = self._reuse[key] = self.backend.compile(instr, args, self._unique_kernel_name)
            for ck in compiled:
                if ck.kernel.name in self.kernels:
                    raise HloError(f"%{instr.name}: the kernel backend returned a second kernel named "
                                   f"{ck.kernel.name}")
                self.kernels[ck.kernel.name] = ck
        thunks: list[Thunk] = []
        for ck in compiled:
            k = ck.kernel
            kargs = tuple(KernelArgument(args[i].slice, args[i].shape, args[i].written, args[i].outputs)
                          for i in ck.arg_indices)
            thunks.append(KernelThunk(instr.name, k.name, kargs, k.grid, k.block, k.shared_bytes))
        return thunks

    def _convolution(self, fusion: HloInstruction, conv: HloInstruction) -> ConvolutionThunk:
        """The ConvolutionThunk of a fusion whose root is `conv` of two of its parameters."""
        inp, ker = (fusion.operands[op.parameter_number] for op in conv.operands)
        window = conv.attrs.get("window")
        config = ConvolutionConfig(
            "forward", inp.shape.to_string(), ker.shape.to_string(), fusion.shape.to_string(),
            str(window).strip("{}") if window is not None else "", str(conv.attrs["dim_labels"]),
            int(conv.attrs.get("feature_group_count", 1) or 1),
            int(conv.attrs.get("batch_group_count", 1) or 1))
        return ConvolutionThunk(fusion.name, config, _slice(self.ba, inp), _slice(self.ba, ker),
                                _slice(self.ba, fusion))

    def _gemm_fusion(self, fusion: HloInstruction) -> GemmFusionThunk:
        """A Triton GEMM fusion as one library call on the host (its computation as HLO text)."""
        return GemmFusionThunk(fusion.name, computation_module_text(fusion.fused_computation()),
                               tuple(_slice(self.ba, o) for o in fusion.operands),
                               tuple(o.shape.to_string() for o in fusion.operands), _slice(self.ba, fusion),
                               fusion.shape.to_string())

    def _unique_kernel_name(self, preferred: str) -> str:
        base = sanitize_kernel_name(preferred)
        name, k = base, 0
        while name in self._kernel_names:
            k += 1
            name = f"{base}_{k}"
        self._kernel_names.add(name)
        return name


_EMITTERS: dict[ThunkKind, Callable[[ThunkEmitter, HloInstruction], list[Thunk]]] = {
    ThunkKind.NONE: ThunkEmitter._nothing,
    ThunkKind.CONTROL_FLOW: ThunkEmitter._control_flow,
    ThunkKind.GEMM: ThunkEmitter._gemm,
    ThunkKind.CUDNN_CONV: ThunkEmitter._cudnn_conv,
    ThunkKind.COPY: ThunkEmitter._copy,
    ThunkKind.MEMZERO: ThunkEmitter._memzero,
    ThunkKind.RNG_STATE: ThunkEmitter._rng_state,
    ThunkKind.COLLECTIVE: ThunkEmitter._collective,
    ThunkKind.FUSION: ThunkEmitter._fusion,
}


_NAME_RE = re.compile(r"%([A-Za-z_][A-Za-z0-9_.\-]*)")


def computation_fingerprint(comp: HloComputation) -> str:
    """The text of a computation with every instruction and computation name replaced by its
    position, so that two fusions doing the same thing compare equal (XLA's kernel reuse)."""
    names: dict[str, str] = {}
    lines = []
    for instr in comp.post_order():
        names.setdefault(instr.name, f"i{len(names)}")
        for callee in instr.called_computations():
            names.setdefault(callee.name, "{" + computation_fingerprint(callee) + "}")
        text = print_instruction(instr, print_metadata=False)
        lines.append(_NAME_RE.sub(lambda m: names.get(m.group(1), m.group(0)), text))
    return "\n".join(lines) + f"\nroot {names[comp.root.name]}"


def kernel_reuse_key(fusion: HloInstruction, args: list[KernelArgumentSpec]) -> str:
    """Fusions with equal keys share one kernel: same computation, operand and output shapes, and
    the same pattern of arguments sharing a slice (it decides the kernel's parameters)."""
    pattern = [(a.shape, a.written, a.operands, a.outputs) for a in args]
    operands = [op.shape.to_string() for op in fusion.operands]
    body = computation_fingerprint(fusion.fused_computation())
    return hashlib.sha256(repr((body, fusion.shape.to_string(), operands, pattern)).encode()).hexdigest()


def _known_trip_count(instr: HloInstruction) -> int | None:
    data = instr.backend_config_data
    if isinstance(data, dict):
        n = data.get("known_trip_count", {})
        if isinstance(n, dict) and "n" in n:
            try:
                return int(n["n"])
            except (TypeError, ValueError):
                return None
    return None


def _memset_value(fusion: HloInstruction) -> int | None:
    """The 32-bit memset pattern of a fusion that only broadcasts a scalar constant (XLA's memset
    fusions), or None. Zero fills any size; other values need 8/16/32-bit elements."""
    root = fusion.fused_computation().root
    if not root.shape.is_array or root.shape.num_elements == 0:
        return None
    if root.opcode == "broadcast" and root.operands[0].opcode == "constant":
        const = root.operands[0]
    elif root.opcode == "constant":
        const = root
    else:
        return None
    if const.literal is None or const.literal_unknown:
        return None
    flat = np.asarray(const.literal).reshape(-1)
    if flat.size == 0 or not (flat == flat[0]).all():
        return None
    raw = flat[:1].tobytes()
    if not any(raw):
        return 0
    if len(raw) not in (1, 2, 4) or root.shape.byte_size() % 4:
        return None
    return int.from_bytes(raw * (4 // len(raw)), "little")


def _wrapped_convolution(fusion: HloInstruction) -> HloInstruction | None:
    """The convolution a fusion only wraps (its root, of two of its parameters), else None."""
    root = fusion.fused_computation().root
    if root.opcode != "convolution" or "dim_labels" not in root.attrs or not fusion.shape.is_array:
        return None
    if not all(op.opcode == "parameter" for op in root.operands) or len(root.operands) != 2:
        return None
    return root


def _memcpy_source(fusion: HloInstruction) -> int | None:
    """The operand number whose bytes a fusion returns unchanged (root = parameter, or a copy /
    bitcast chain of one keeping the bytes), else None (XLA's memcpy fusion)."""
    node = fusion.fused_computation().root
    if not node.shape.is_array or node.shape.byte_size() != fusion.shape.byte_size():
        return None
    while node.opcode != "parameter":
        if node.opcode != "bitcast" and not is_memcpy(node):
            return None
        node = node.operands[0]
    operand = fusion.operands[node.parameter_number]
    if not operand.shape.is_array or operand.shape.byte_size() != fusion.shape.byte_size():
        return None
    return node.parameter_number


def computation_module_text(comp: HloComputation) -> str:
    """HLO text of a module whose entry is `comp` (the computations it calls first)."""
    from hlo_common.hlo.printer import print_computation

    order: list[HloComputation] = []

    def visit(c: HloComputation) -> None:
        for instr in c.instructions:
            for callee in instr.called_computations():
                if callee not in order:
                    visit(callee)
                    order.append(callee)

    visit(comp)
    parts = [print_computation(c) for c in order] + ["ENTRY " + print_computation(comp)]
    return f"HloModule {comp.name}\n\n" + "\n".join(parts)
