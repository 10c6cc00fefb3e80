"""The hlo-codegen driver: HLO module -> manifest (XLA's `GpuCompiler::RunBackend`, in stages).

Where it sits: behind `hlo-codegen` (the CLI) and `hlo_run`'s in-process compile hook. Stages:

1. prepare (on codegen's own module), the pass pipeline `codegen-prepare` of shared passes
   (`hlo_common.passes`, so hlo-opt can run them too; `prepare_pipeline`): `xla-builder-calls`
   (`xla_builder.*` custom calls become calls of their decomposition), `async-ops-to-calls`,
   `flatten-call-graph`, `bounded-dynamic-dimensions` (static at their bounds), then
   `codegen-support-checks` (unbounded dimensions and layouts differing across control flow are
   refused), `single-device-collectives` (on one device: collectives needing more refused, layout
   changes turned into copies; a module for N > 1 devices keeps them for collective thunks),
   `gemm-fallback` (gemm custom calls cuBLAS cannot run become dot +
   epilogue fusions), `cudnn-conv-fallback` (XLA:GPU's cuDNN convolution calls become convolutions
   and an epilogue fusion; for the cuda target only those cuDNN cannot take: the others become
   CudnnConvolutionThunks), `inline-nested-fusions`, `fusion-wrapper` (lone instructions that need a
   kernel wrapped into fusions; `fusion_wrapper.needs_kernel` is codegen's rule) and
   `codegen-copy-insertion` (the copies control flow and in-place ops need), then the wrapper
   again for copies that need kernels. On hlo-opt's output most of these change nothing;
2. buffer assignment (`buffer_assignment.assign_buffers`);
3. thunk emission, with kernels emitted and lowered by the kernel backend for the target
   (`thunk_emitter`): PTX for `cuda` (checked into a cubin with nvJitLink; LLVM and nvJitLink
   on a thread per CPU, `CompileOptions.jobs`), LLVM IR for `host`;
   with `CompileOptions.cache_dir`, a kernel compiled before comes from the kernel cache
   (`kernel_cache`), byte for byte what compiling it again gives;
4. the manifest (`hlo_common.manifest.manifest`): allocations with constant bytes, entry signature,
   kernels, thunks, the module text.

    >>> result = compile_module(parse_module(text), CompileOptions(target="host"))  # doctest: +SKIP
    >>> result.manifest.to_bytes()[:40]
    b'{\\n "allocations": [\\n  {\\n   "alignment"'

Every failure is an HloError naming the instruction or kernel.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from hlo_common.errors import HloError
from hlo_common.hlo_pass.pass_base import HloPass
from hlo_common.hlo_pass.pipeline import HloPassPipeline, RunOptions, verify
from hlo_common.hlo.ir import HloModule
from hlo_common.manifest.layout_bytes import array_to_bytes
from hlo_common.manifest.manifest import Allocation, EntrySignature, Manifest, OutputLeaf
from hlo_common.manifest.thunks import BufferSlice
from hlo_common.passes._support import global_computations
from hlo_common.passes.single_device_collectives import module_devices
from hlo_common.hlo.printer import print_module

from hlo_codegen.buffer_assignment import BufferAssignment, assign_buffers
from hlo_codegen.buffer_assignment.assignment import ENTRY_PARAMETER_ALIGNMENT
from hlo_codegen.thunk_emitter import CompiledKernel, KernelBackend, ThunkEmitter, TritonRefusal

TARGETS = ("cuda", "host")
PREPARE_PIPELINE = "codegen-prepare"
DEFAULT_ARCH = "sm_90"


@dataclass(frozen=True)
class CompileOptions:
    target: str = "cuda"
    arch: str = DEFAULT_ARCH
    cache_dir: str | None = None  # the kernel cache's directory (`kernel_cache`); None: no cache
    jobs: int | None = None  # threads compiling PTX (`kernel_backend`); None: one per CPU
    num_replicas: int | None = None  # devices to compile for; None: the module header's counts
    num_partitions: int | None = None
    triton: bool | None = None  # cuda: GEMM fusions as Triton kernels; None: when `triton` is installed
    keep_collectives: bool = False  # one device: collectives as collective thunks (MPI / NCCL), not copies

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise HloError(f"unknown target '{self.target}' (expected one of {', '.join(TARGETS)})")

    @property
    def manifest_arch(self) -> str:
        return self.arch if self.target == "cuda" else "host"


@dataclass
class CompileResult:
    module: HloModule  # as compiled: wrapped, with copies
    assignment: BufferAssignment
    manifest: Manifest
    kernels: dict[str, CompiledKernel] = field(default_factory=dict)


def prepare_pipeline(target: str = "host", gemm_fallback=None,
                     keep_collectives: bool = False) -> HloPassPipeline:
    """Stage 1 as a pass pipeline (the shared passes of `hlo_common.passes`, in this order); for
    the cuda target the cuDNN convolution calls cuDNN takes and the cuBLASLt calls with an epilogue
    cublasLtMatmul takes stay calls. `gemm_fallback` (a predicate on Triton GEMM fusions) adds
    `triton-gemm-fallback` for the fusions it picks. `keep_collectives` leaves out
    `single-device-collectives` (the collectives of a one-device module become collective thunks)."""
    from hlo_common.passes.async_calls import AsyncOpsToCalls
    from hlo_common.passes.bounded_dynamic_dimensions import BoundedDynamicDimensions
    from hlo_common.passes.codegen_copy_insertion import CodegenCopyInsertion
    from hlo_common.passes.cudnn_conv_fallback import CudnnConvFallback
    from hlo_common.passes.decomposition_calls import DecompositionCalls
    from hlo_common.passes.flatten_call_graph import FlattenCallGraph
    from hlo_common.passes.fusion_wrapper import FusionWrapper
    from hlo_common.passes.gemm_fallback import GemmFallback
    from hlo_common.passes.nested_fusions import NestedFusionInliner
    from hlo_common.passes.single_device_collectives import SingleDeviceCollectives
    from hlo_common.passes.triton_gemm_fallback import TritonGemmFallback

    from hlo_codegen.fusion_wrapper import needs_kernel

    return HloPassPipeline(PREPARE_PIPELINE, [
        DecompositionCalls(), AsyncOpsToCalls(), FlattenCallGraph(),
        BoundedDynamicDimensions(),  # `<=N` dimensions static at N, as the interpreter has them
        CodegenSupportChecks(),  # unbounded dimensions and layouts across control flow refused
        *([] if keep_collectives else [SingleDeviceCollectives()]),
        GemmFallback(keep_lt_epilogues=target == "cuda"),
        CudnnConvFallback(keep_cudnn_calls=target == "cuda"),
        NestedFusionInliner(),
        *([TritonGemmFallback(gemm_fallback)] if gemm_fallback is not None else []),
        FusionWrapper(must_wrap=needs_kernel),
        CodegenCopyInsertion(),
        FusionWrapper(must_wrap=needs_kernel),  # copies that copy insertion added may need kernels
    ])


def prepare_module(module: HloModule, options: RunOptions | None = None, target: str = "host",
                   gemm_fallback=None, keep_collectives: bool = False) -> None:
    """Stage 1, in place: flat call graph, static shapes, wrapped lone instructions, copies."""
    prepare_pipeline(target, gemm_fallback, keep_collectives).run_with(module, options or RunOptions())


@dataclass
class CodegenSupportChecks(HloPass):
    """Refuses what buffers cannot hold: dynamic shapes, layouts differing across control flow."""

    name = "codegen-support-checks"

    def run(self, module: HloModule) -> bool:
        check_static_shapes(module)
        check_control_flow_layouts(module)
        return False


def check_static_shapes(module: HloModule) -> None:
    """Buffers have static sizes here: a dynamic dimension (`f32[<=8]`, `f32[?]`) is refused."""
    for comp in global_computations(module):
        for instr in comp.instructions:
            if any(leaf.is_array and leaf.is_dynamic for _, leaf in instr.shape.leaf_shapes()):
                shape = instr.shape.to_string(False)
                raise HloError(f"%{instr.name}: dynamic shape {shape} is not supported by hlo-codegen "
                               f"(in computation {comp.name})")


def check_control_flow_layouts(module: HloModule) -> None:
    """Operands of while / conditional / call and the called computations' parameters and roots
    must agree on shapes *with layouts*: they share buffers, so bytes mean the same thing."""
    for comp in global_computations(module):
        for instr in comp.instructions:
            for what, have, want in _control_flow_pairs(instr):
                if have.to_string() != want.to_string():
                    raise HloError(f"%{instr.name} ({instr.opcode}): {what} is {have.to_string()}, expected "
                                   f"{want.to_string()} (layouts must match across control flow)")


def _control_flow_pairs(instr):
    op = instr.opcode
    if op == "while":
        for key in ("condition", "body"):
            yield f"{key} parameter", instr.attrs[key].parameters[0].shape, instr.shape
        yield "operand", instr.operands[0].shape, instr.shape
        yield "body root", instr.attrs["body"].root.shape, instr.shape
    elif op == "conditional":
        branches = instr.attrs.get("branch_computations") or [instr.attrs["true_computation"],
                                                                instr.attrs["false_computation"]]
        for k, branch in enumerate(branches):
            yield f"operand {k + 1}", instr.operands[k + 1].shape, branch.parameters[0].shape
            yield f"branch {k} root", branch.root.shape, instr.shape
    elif op == "call":
        callee = instr.attrs["to_apply"]
        for i, param in enumerate(callee.parameters):
            yield f"operand {i}", instr.operands[i].shape, param.shape
        yield "callee root", callee.root.shape, instr.shape


def compile_module(module: HloModule, options: CompileOptions,
                   backend: KernelBackend | None = None, dumper: object | None = None) -> CompileResult:
    """Compile `module` (modified in place) for `options.target`; `dumper` (see
    `hlo_common.hlo_pass.pipeline.RunOptions`) sees the module between prepare passes."""
    for key, count in (("replica_count", options.num_replicas), ("num_partitions", options.num_partitions)):
        if count is not None:  # the header is what the passes, the emitter and hlo-run read
            module.set_header_attr(key, str(count))
    triton = triton_emitter(module, options)
    gemm_fallback = None
    if options.target == "cuda":  # what the Triton writer does not take: cuBLAS plus kernels
        gemm_fallback = triton.rejects if triton is not None else (lambda fusion: True)
    prepare_module(module, RunOptions(dumper=dumper), options.target, gemm_fallback, options.keep_collectives)
    # Kernels are made from this module and the bisector interprets it: a prepare pass that
    # leaves invalid HLO (a bug) must stop here, not become a wrong answer.
    verify(module, "hlo-codegen's prepare passes left invalid HLO")
    assignment = assign_buffers(module)
    backend = backend if backend is not None else default_backend(options)
    host = options.target == "host"
    emitter = ThunkEmitter(module, assignment, backend, convolution_thunks=host, gemm_fusion_thunks=host,
                           triton=triton, keep_collectives=options.keep_collectives)
    try:
        thunks = emitter.emit_entry()
    except TritonRefusal:  # rare: emit again, the refused GEMM fusions as loop kernels in their place
        _finish(backend, quiet=True)
        triton.reset()
        emitter = ThunkEmitter(module, assignment, backend, convolution_thunks=host, gemm_fusion_thunks=host,
                               triton=triton, keep_collectives=options.keep_collectives)
        thunks = _emit_waiting_for_triton(emitter, backend)
    except BaseException:
        _finish(backend)  # a kernel still compiling that failed came first: its error is the one
        raise
    _finish(backend)
    replicas, partitions = module_devices(module)
    manifest = Manifest(
        module_name=module.name, target=options.target, arch=options.manifest_arch,
        hlo=print_module(module), entry=entry_signature(module, assignment),
        allocations=allocations(assignment), kernels={k: ck.kernel for k, ck in emitter.kernels.items()},
        thunks=thunks, replica_count=replicas, num_partitions=partitions)
    manifest.validate()
    return CompileResult(module, assignment, manifest, emitter.kernels)


_TRITON_NOTE_SAID = False


def triton_emitter(module: HloModule, options: CompileOptions):
    """The Triton GEMM emitter for a cuda compile (`triton_gemm.emitter`), or None: for the host,
    when `options.triton` is False, or when the `triton` package is missing, which is said once
    per process on stderr when the module has GEMM fusions (they then fall back to cuBLAS plus
    kernels). Every GEMM fusion's tile config is checked against the device here, before anything
    is compiled."""
    global _TRITON_NOTE_SAID
    if options.target != "cuda":
        return None
    from hlo_common.gpu.device import device_for_arch
    from hlo_common.passes.triton_gemm_fallback import is_triton_gemm_fusion

    from hlo_codegen.triton_gemm.compile import triton_available
    from hlo_codegen.triton_gemm.config import check_config, fusion_config

    device = device_for_arch(options.arch)
    fusions = [i for c in global_computations(module) for i in c.instructions if is_triton_gemm_fusion(i)]
    for fusion in fusions:
        if sum(i.opcode == "dot" for i in fusion.fused_computation().instructions) == 1:
            check_config(fusion, fusion_config(fusion), device)
    if options.triton is False:
        return None
    if not triton_available():
        if fusions and not _TRITON_NOTE_SAID:
            _TRITON_NOTE_SAID = True
            print("hlo-codegen: note: the `triton` package is not installed (pip install "
                  "'hlo-toolchain[triton]'): GEMM fusions fall back to cuBLAS plus kernels", file=sys.stderr)
        return None
    from hlo_codegen.triton_gemm.emitter import TritonGemmEmitter

    return TritonGemmEmitter(options.arch, device, options.cache_dir)


def _finish(backend: KernelBackend, quiet: bool = False) -> None:
    """Let a backend that compiles on threads complete its kernels (`EmitterBackend.finish`);
    `quiet`: a failure is left for the next emission to meet again."""
    finish = getattr(backend, "finish", None)
    if finish is not None:
        try:
            finish()
        except Exception:  # noqa: BLE001 - only with quiet (re-raised otherwise)
            if not quiet:
                raise


def _emit_waiting_for_triton(emitter: ThunkEmitter, backend: KernelBackend):
    try:
        return emitter.emit_entry(wait_for_triton=True)
    except BaseException:
        _finish(backend)
        raise


def default_backend(options: CompileOptions) -> KernelBackend:
    """The emitters + lowering of `hlo_codegen` for the target (imported on first use), behind
    the kernel cache when `options.cache_dir` names one."""
    from hlo_codegen.kernel_backend import EmitterBackend, default_jobs

    jobs = options.jobs if options.jobs is not None else default_jobs()
    backend = EmitterBackend(options.target, options.arch, jobs)
    if options.cache_dir is None:
        return backend
    from hlo_codegen.kernel_cache import CachingBackend, KernelCache

    return CachingBackend(backend, KernelCache(options.cache_dir))


def preload(options: CompileOptions) -> None:
    """Import what compiling for `options` needs and start LLVM and nvJitLink, before the input
    is there (the CLI calls it before reading stdin, so behind `hlo-opt |` this happens while
    hlo-opt works). Failures are left for the compile itself to report."""
    try:
        prepare_pipeline()
        _preload_modules(options.target)
        if options.cache_dir is not None:
            from hlo_codegen.kernel_cache import code_version

            code_version(options.target)
        if options.target == "cuda":
            from hlo_codegen.ptx import preload_ptx_tools

            preload_ptx_tools(options.arch)
    except Exception:  # noqa: BLE001 - an early start only; the compile reports real errors
        pass


# Imported on first use by a compile (the lowering's helpers, the verifier, shape inference, the
# reducer probe's numpy.random, the Triton GEMM emitter's modules; not Triton itself): `preload`
# takes them before the input is there, so behind `hlo-opt |` they cost nothing on the clock.
_PRELOAD = ("hlo_codegen.emitters", "hlo_codegen.emitters.reduction_tiled", "hlo_codegen.kernel_backend",
            "hlo_codegen.llvm", "hlo_codegen.llvm.arith", "hlo_codegen.llvm.floats", "hlo_codegen.llvm.memory",
            "hlo_common.hlo.verifier", "hlo_common.hlo.call_depth", "numpy.random")
_PRELOAD_CUDA = ("hlo_codegen.triton_gemm.compile", "hlo_codegen.triton_gemm.config",
                 "hlo_codegen.triton_gemm.emitter")
_PRELOAD_HOST = ("hlo_codegen.llvm.math", "hlo_codegen.llvm.math_narrow")  # the host's vector math


def _preload_modules(target: str) -> None:
    import importlib

    for name in _PRELOAD + (_PRELOAD_CUDA if target == "cuda" else _PRELOAD_HOST):
        importlib.import_module(name)

# -- manifest pieces ----------------------------------------------------------------------------------
def _slice(s) -> BufferSlice:
    return BufferSlice(s.index, s.offset, s.size)


def entry_signature(module: HloModule, ba: BufferAssignment) -> EntrySignature:
    entry = module.entry
    root = entry.root
    outputs = tuple(OutputLeaf(index, leaf.to_string(), _slice(ba.get_slice(root, index)))
                    for index, leaf in root.shape.leaf_shapes() if leaf.is_array)
    params = tuple(p.shape.to_string() for p in entry.parameters)
    return EntrySignature(params, root.shape.to_string(), outputs)


def allocations(ba: BufferAssignment) -> list[Allocation]:
    out = []
    for a in ba.allocations:
        if a.is_entry_computation_parameter:
            kind, align = "parameter", ENTRY_PARAMETER_ALIGNMENT
        elif a.is_constant:
            kind, align = "constant", ba.alignment
        else:
            kind, align = ("output" if a.maybe_live_out else "temp"), ba.alignment
        out.append(Allocation(
            index=a.index, size=a.size, kind=kind, alignment=align, maybe_live_out=a.maybe_live_out,
            parameter_number=a.parameter_number if kind == "parameter" else None,
            parameter_shape_index=tuple(a.param_shape_index) if kind == "parameter" else (),
            constant=_constant_bytes(a) if kind == "constant" else None, color=a.color))
    return out


def _constant_bytes(alloc) -> bytes:
    """The bytes of a constant allocation: its constant's literal (leaf), in physical layout."""
    data = bytearray(alloc.size)
    for value, (offset, size) in sorted(alloc.assigned.items(), key=lambda kv: kv[0].id):
        instr = value.instruction
        literal = instr.literal
        for i in value.index:
            literal = literal[i]
        raw = array_to_bytes(literal, instr.shape.subshape(value.index))
        if len(raw) != size:
            raise HloError(f"%{instr.name}: constant of {len(raw)} bytes in a {size}-byte slice")
        data[offset:offset + size] = raw
    return bytes(data)
