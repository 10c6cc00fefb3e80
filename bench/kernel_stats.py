"""Kernels launched and bytes moved by an optimized module: the first "how fast" figure without a GPU.

`kernel_stats(module)` counts over an optimized module, hlo-opt's or XLA:GPU's alike, what
design/performance.md ("Without a GPU", point 1) asks: a memory-bound program takes about
launches x launch overhead + bytes moved / HBM bandwidth. `bench/fusion_vs_xla.py` applies it to
both compilers' output of the same module; nothing else in the tools depends on it.

Which instructions are kernels. The host-side computations are the entry and, recursively, what
its control flow calls: while conditions and bodies (each counted once, whatever the trip count),
every conditional branch, `call`ed computations (XLA's command buffers) and async wrapped
computations. In those, every instruction is a kernel or a library call except parameters,
constants, tuples, get-tuple-elements, bitcasts, the control-flow instructions themselves and
other bookkeeping (`NOT_KERNELS`). So a fusion is one kernel, a custom call (`__cublas$gemm`) one
library call, a `copy` one memcpy, and an op left outside any fusion (hlo-opt's output before
`fusion-wrapper`) its own kernel. The bodies of fusions are never entered.

Bytes of a kernel: what it reads plus what it writes, counting each distinct operand once.

* read: every operand's bytes (the sum of a tuple's leaves), except an operand that the kernel
  only partly reads: where a fusion parameter (or a lone op's operand) is used only as the
  sliced operand of `slice`, `dynamic-slice` or `gather` (looking through bitcasts), it counts
  the bytes of those users' results, at most the operand's size;
* in place: a `dynamic-update-slice` that is the root of its kernel (or an element of the root
  tuple) and whose operand 0 is a parameter of it updates that buffer in place, so that operand
  counts nothing and the result counts only the update's bytes (the update itself is read
  through whatever operands compute it); a root `scatter` likewise updates its operand 0 in
  place, counting the updates' bytes read from the operand and the updates' bytes written;
* written: the result's bytes (the sum of a tuple's leaves), less what the in-place rule says,
  and less the scratch workspace (an s8/u8 vector as last tuple element) of a cuBLAS / cuDNN
  custom call.

Every kernel gets a kind: `loop`, `reduction`, `transpose`, `concatenate`, `scatter`,
`in_place_dus`, `sort`, `input` (another kInput fusion), `copy`, `library` (custom calls, and
lone dot/convolution ops that become library calls), `triton` (XLA's Triton fusions: GEMMs
and softmax/norms), `cudnn`, or `custom` (another kCustom fusion with a backend kind, such as
XLA's `dynamic_slice_fusion`). The kind comes from the fusion kind, its backend kind and the
opcodes in the body; it is a label for tables, not XLA's hero analysis.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape

# Host-side instructions that launch nothing (their computations, if any, are walked instead).
NOT_KERNELS = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "while", "conditional", "call",
    "after-all", "add-dependency", "opt-barrier", "domain", "async-start", "async-update",
    "async-done", "copy-done", "send-done", "recv-done", "partition-id", "replica-id",
})
# Control flow whose called computations run on the host side.
_HOST_CALLERS = frozenset({"while", "conditional", "call", "async-start"})
# Opcodes left out of a kernel's opcode census: structure rather than computation.
_STRUCTURAL = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast"})
_PARTIAL_READERS = frozenset({"slice", "dynamic-slice", "gather"})
_LIBRARY_OPS = frozenset({"dot", "convolution", "custom-call", "fft", "cholesky", "triangular-solve"})


@dataclass(frozen=True)
class Kernel:
    """One kernel or library call of a host-side computation."""

    name: str  # the instruction's name
    computation: str  # the host-side computation it is in
    opcode: str  # fusion, custom-call, copy, or the lone op's opcode
    kind: str  # see the module docstring
    bytes_read: int
    bytes_written: int
    ops: tuple[tuple[str, int], ...]  # (opcode, count) of its body's compute ops, sorted by opcode
    target: str = ""  # a custom call's target (with ":EPILOGUE" of a cuBLAS GEMM that has one),
    #                   a kCustom fusion's backend kind (`__triton`, `__triton_gemm`, ...)

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def op_names(self) -> tuple[str, ...]:
        return tuple(op for op, _ in self.ops)


@dataclass(frozen=True)
class KernelStats:
    kernels: tuple[Kernel, ...]  # in the order of the host computations' instructions

    @property
    def count(self) -> int:
        return len(self.kernels)

    @property
    def bytes(self) -> int:
        return sum(k.bytes for k in self.kernels)

    @property
    def kinds(self) -> dict[str, int]:
        """Kernels per kind, sorted by kind."""
        return dict(sorted(Counter(k.kind for k in self.kernels).items()))

    @property
    def uses_triton(self) -> bool:
        return any(k.kind == "triton" for k in self.kernels)

    @property
    def uses_cudnn(self) -> bool:
        return any(k.kind == "cudnn" for k in self.kernels)


def kernel_stats(module: HloModule) -> KernelStats:
    """Every kernel of the host-side computations of `module`, with its bytes and kind."""
    kernels: list[Kernel] = []
    stack = [module.entry]
    while stack:  # depth first, callees in their callers' order: deterministic
        comp = stack.pop()
        callees: list[HloComputation] = []
        for instr in comp.instructions:
            if instr.opcode in _HOST_CALLERS:
                callees.extend(instr.called_computations())
            elif instr.opcode not in NOT_KERNELS:
                kernels.append(_kernel(instr, comp))
        stack.extend(reversed(callees))
    return KernelStats(tuple(kernels))


# -- one kernel -----------------------------------------------------------------------------------
def _leaf_bytes(shape: Shape) -> int:
    return sum(leaf.byte_size() for _, leaf in shape.leaf_shapes())


def _kernel(instr: HloInstruction, comp: HloComputation) -> Kernel:
    if instr.opcode == "fusion":
        body = instr.fused_computation()
        params = [body.parameter(i) for i in range(len(instr.operands))]
        read, written = _body_bytes(instr, params, body.root)
        ops = _census(body)
        kind = _fusion_kind(instr, body, ops)
    else:
        read, written = _body_bytes(instr, None, instr)
        ops = ((instr.opcode, 1),)
        kind = _lone_kind(instr)
    if instr.opcode == "custom-call":
        written -= _workspace_bytes(instr)
    return Kernel(instr.name, comp.name, instr.opcode, kind, read, written, ops, _target(instr))


def _config(instr: HloInstruction, key: str) -> dict:
    config = instr.backend_config_data
    value = config.get(key) if isinstance(config, dict) else None
    return value if isinstance(value, dict) else {}


def _target(instr: HloInstruction) -> str:
    if instr.opcode == "custom-call":
        target = str(instr.attr("custom_call_target", ""))
        epilogue = _config(instr, "gemm_backend_config").get("epilogue", "DEFAULT")
        return target if epilogue == "DEFAULT" else f"{target}:{epilogue}"
    if instr.opcode == "fusion" and instr.attr("kind") == "kCustom":
        return str(_config(instr, "fusion_backend_config").get("kind", ""))
    return ""


def _body_bytes(instr: HloInstruction, params: list[HloInstruction] | None,
                root: HloInstruction) -> tuple[int, int]:
    """(read, written) of a kernel whose body has `params` (None: the lone op is its own body,
    its operands standing for parameters) and `root`."""
    outputs = list(root.operands) if root.opcode == "tuple" else [root]
    written = _leaf_bytes(instr.shape)
    in_place: dict[int, int] = {}  # operand number -> bytes read of it by an in-place root
    for out in outputs:
        if out.opcode not in ("dynamic-update-slice", "scatter"):
            continue
        target = _operand_number(out.operands[0], params, instr)
        if target is None:
            continue
        if out.opcode == "dynamic-update-slice":
            update = out.operands[1].shape.byte_size()
            in_place[target] = in_place.get(target, 0)
        else:
            n = (len(out.operands) - 1) // 2  # scatter(operands..., indices, updates...)
            update = sum(u.shape.byte_size() for u in out.operands[n + 1:])
            in_place[target] = in_place.get(target, 0) + update
        written -= _leaf_bytes(out.shape) - update
    read = 0
    seen: set[int] = set()
    for i, op in enumerate(instr.operands):
        if id(op) in seen:
            continue
        seen.add(id(op))
        full = _leaf_bytes(op.shape)
        if i in in_place:
            read += min(full, in_place[i])
        elif params is None:
            read += _lone_operand_read(instr, i, full)
        else:
            read += _param_read(params[i], full)
    return read, written


def _operand_number(value: HloInstruction, params: list[HloInstruction] | None,
                    instr: HloInstruction) -> int | None:
    """Which kernel operand `value` is (through bitcasts), or None if it is computed inside."""
    while value.opcode == "bitcast" and params is not None:
        value = value.operands[0]
    if params is None:
        return instr.operands.index(value) if value in instr.operands else None
    return value.parameter_number if value.opcode == "parameter" else None


def _lone_operand_read(instr: HloInstruction, i: int, full: int) -> int:
    if i == 0 and instr.opcode in _PARTIAL_READERS:
        return min(full, instr.shape.byte_size())
    return full


def _param_read(param: HloInstruction, full: int) -> int:
    """Bytes a fusion reads of the parameter: `full`, unless only slicing users read it."""
    total = 0
    stack = [param]
    while stack:
        value = stack.pop()
        for user in value.users:
            if user.opcode == "bitcast":
                stack.append(user)
            elif user.opcode in _PARTIAL_READERS and user.operands[0] is value and \
                    value not in user.operands[1:]:
                total += _leaf_bytes(user.shape)
            else:
                return full
    return min(full, total)


def _workspace_bytes(instr: HloInstruction) -> int:
    target = str(instr.attr("custom_call_target", ""))
    if not instr.shape.is_tuple or not target.startswith(("__cublas", "__cudnn")):
        return 0
    last = instr.shape.tuple_shapes[-1]
    if last.is_array and last.rank == 1 and last.element_type.name in ("s8", "u8"):
        return last.byte_size()
    return 0


# -- kinds ----------------------------------------------------------------------------------------
def _census(body: HloComputation) -> tuple[tuple[str, int], ...]:
    """(opcode, count) of the compute ops of a fused computation and the fusions nested in it."""
    counts: Counter[str] = Counter()
    stack = [body]
    while stack:
        comp = stack.pop()
        for instr in comp.instructions:
            if instr.opcode == "fusion":
                stack.append(instr.fused_computation())
            elif instr.opcode not in _STRUCTURAL:
                counts[instr.opcode] += 1
    return tuple(sorted(counts.items()))


def _fusion_kind(instr: HloInstruction, body: HloComputation, ops: tuple[tuple[str, int], ...]) -> str:
    kind = instr.attr("kind")
    name = _target(instr)
    if "triton" in name:
        return "triton"
    if "cudnn" in name:
        return "cudnn"
    if name:
        return "custom"
    opcodes = {op for op, _ in ops}
    root = body.root
    outputs = root.operands if root.opcode == "tuple" else [root]
    out_ops = {o.opcode for o in outputs}
    if "scatter" in out_ops:
        return "scatter"
    if "dynamic-update-slice" in out_ops:
        return "in_place_dus"
    if "sort" in opcodes:
        return "sort"  # XLA's sort is a kCustom fusion without a backend kind
    if kind == "kInput":
        for label, opcode in (("reduction", "reduce"), ("transpose", "transpose"),
                              ("concatenate", "concatenate")):
            if opcode in opcodes:
                return label
        return "transpose" if "copy" in opcodes else "input"
    return "loop"


def _lone_kind(instr: HloInstruction) -> str:
    op = instr.opcode
    if op in _LIBRARY_OPS:
        return "library"
    if op == "reduce":
        return "reduction"
    if op == "dynamic-update-slice":
        return "in_place_dus"
    if op in ("transpose", "copy", "sort", "scatter", "concatenate"):
        return op
    return "loop"
