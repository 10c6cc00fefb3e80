"""Checks of a manifest's kernels against their code, before any of them is loaded or run.

Where it sits: `ManifestExecutable.__init__` (hlo_run.manifest_runtime) calls
`check_manifest_kernels` on every manifest, host and cuda alike. A manifest is executable code,
like a shared library, and its sha256 only guards against corruption (anyone can recompute it),
so what the runtime trusts is checked here, one `KernelCheckError` line naming the kernel:

- the code names no outside function but those of `hlo_common.manifest.kernel_symbols` (host
  LLVM IR: declarations, external variables, indirect calls and inline assembly are refused;
  PTX: `.extern .func` and calls to anything but a `.func` of the same PTX);
- the kernel's signature is what the runtime passes: host `void @name(ptr, i64, i64)` whose
  argument array is read only at constant indices below the manifest's `num_params` (a kernel
  reading one more pointer than it is given crashed the process); PTX `.entry name(...)` with
  `num_params` 64-bit parameters (a Triton kernel: and its `scratch_params`, passed as null);
- launch dimensions and shared memory are within the device's limits (XLA's LaunchDimensions
  checks; a 2^31 x 65535 x 65535 grid is refused rather than run for ever).
"""

from __future__ import annotations

import functools
import hashlib
import re

from hlo_common.errors import HloError
from hlo_common.gpu.device import DeviceDescription, device_for_arch
from hlo_common.manifest.kernel_symbols import allowed_host_text, host_may_declare, ptx_may_declare
from hlo_common.manifest.manifest import Manifest, ManifestKernel

MAX_BLOCK_DIMS = (1024, 1024, 64)  # CUDA's per-dimension thread limits
_HOST_SIGNATURE = "void (ptr, i64, i64)"
_CALL_OPCODES = ("call", "invoke", "callbr")


class KernelCheckError(HloError):
    """A manifest kernel whose code or metadata the runtime will not run."""


def check_manifest_kernels(manifest: Manifest, source: str = "") -> None:
    """Every kernel's limits, signature and outside references; the first problem is raised."""
    device = device_for_arch(manifest.arch) if manifest.target == "cuda" else device_for_arch("sm_90")
    prefix = f"{source}: " if source else ""
    for name in sorted(manifest.kernels):
        kernel = manifest.kernels[name]
        try:
            check_launch(kernel, device)
            if manifest.target == "host":
                check_host_ir(kernel.llvm_ir or "", kernel.name, kernel.num_params)
            else:
                check_ptx(kernel.ptx or "", kernel.name, kernel.num_params + kernel.scratch_params)
        except KernelCheckError as exc:
            raise KernelCheckError(f"{prefix}kernel {name}: {exc.one_line()}") from None


def check_launch(kernel: ManifestKernel, device: DeviceDescription) -> None:
    for what, dims, limits in (("grid", kernel.grid, device.block_dim_limit),
                               ("block", kernel.block, MAX_BLOCK_DIMS)):
        for axis, n, limit in zip("xyz", dims, limits):
            if not 1 <= n <= limit:
                raise KernelCheckError(f"{what} dimension {axis} is {n}; the device allows 1 to {limit}")
    threads = kernel.block[0] * kernel.block[1] * kernel.block[2]
    if threads > device.threads_per_block_limit:
        raise KernelCheckError(f"{threads} threads per block; the device allows "
                               f"{device.threads_per_block_limit}")
    if not 0 <= kernel.shared_bytes <= device.shared_memory_per_block_optin:
        raise KernelCheckError(f"{kernel.shared_bytes} bytes of shared memory; the device allows "
                               f"{device.shared_memory_per_block_optin}")
    if kernel.num_params < 0:
        raise KernelCheckError(f"num_params is {kernel.num_params}")


# -- host LLVM IR -----------------------------------------------------------------------------------
def check_host_ir(llvm_ir: str, name: str, num_params: int) -> None:
    """Outside references and the kernel's signature (cached by the text's hash)."""
    problem = _host_ir_problem(hashlib.sha256(llvm_ir.encode()).hexdigest(), llvm_ir, name, num_params)
    if problem is not None:
        raise KernelCheckError(problem)


@functools.lru_cache(maxsize=256)
def _host_ir_problem(_digest: str, llvm_ir: str, name: str, num_params: int) -> str | None:
    import llvmlite.binding as llvm

    try:
        module = llvm.parse_assembly(llvm_ir)
        module.verify()
    except RuntimeError as err:
        return f"invalid LLVM IR: {' '.join(str(err).split())[:200]}"
    for g in module.global_variables:
        if g.is_declaration:
            return f"its LLVM IR declares the outside variable @{g.name}, which the host lowering never does"
    for f in module.functions:
        if f.is_declaration and not host_may_declare(f.name):
            return (f"its LLVM IR declares @{f.name}; host kernels may call {allowed_host_text()} "
                    "(hlo_common.manifest.kernel_symbols)")
    text = str(module)
    if re.search(r"^module asm", text, re.M):
        return "its LLVM IR holds module-level assembly, which the host lowering never emits"
    if not _all_calls_direct(text, {f.name for f in module.functions}):
        for f in module.functions:  # the exact (and slower) walk names the problem
            problem = _call_problem(f, llvm)
            if problem is not None:
                return problem
    return _signature_problem(module, name, num_params)


_TYPE = r"(?:void|i\d+|half|bfloat|float|double|ptr|<\d+ x [\w ]+>|\{ [\w ,]* \}|\[\d+ x [\w ]+\])"
_DIRECT_CALL = re.compile(
    r"\s*(?:%[-\w$.]+ = )?(?:tail |musttail |notail )?call (?:(?:fast|nnan|ninf|nsz|arcp|contract|afn|reassoc) )*"
    rf"(?:(?:zeroext|signext|noundef|nonnull|noalias) )*{_TYPE} @([-\w$.]+)\(")


def _all_calls_direct(text: str, functions: set[str]) -> bool:
    """A fast look at LLVM's printing: True when every call is `call <type> @f(` of a function of
    the module and no inline assembly appears (the lowering's only form); False means "look closer"."""
    if "callbr " in text or "invoke " in text or re.search(r"\basm (?:\w+ )*\"", text):
        return False
    for line in text.splitlines():
        if re.search(r"\bcall\b", line):
            m = _DIRECT_CALL.match(line)
            if m is None or m.group(1) not in functions:
                return False
    return True


def _call_problem(f, llvm) -> str | None:
    for block in f.blocks:
        for inst in block.instructions:
            if inst.opcode not in _CALL_OPCODES:
                continue
            callee = list(inst.operands)[-1]
            if inst.opcode == "callbr" or callee.value_kind == llvm.ValueKind.inline_asm:
                return f"@{f.name} uses inline assembly, which the host lowering never emits"
            if callee.value_kind != llvm.ValueKind.function:
                return f"@{f.name} calls through a pointer, which the host lowering never does"
    return None


def _signature_problem(module, name: str, num_params: int) -> str | None:
    try:
        f = module.get_function(name)
    except NameError:
        return f"its LLVM IR does not define @{name}"
    if f.is_declaration:
        return f"its LLVM IR does not define @{name}"
    if str(f.global_value_type) != _HOST_SIGNATURE:
        return f"@{name} has type {f.global_value_type}; the runtime calls {_HOST_SIGNATURE}"
    return _argument_array_problem(str(f), list(f.arguments)[0].name, name, num_params)


_IDENT = r"[-a-zA-Z$._][-a-zA-Z$._0-9]*"
_SLOT = re.compile(rf"\s*%({_IDENT}) = getelementptr (?:inbounds )?ptr, ptr %({_IDENT}), i64 (-?\d+)\s*$")
_LOAD = re.compile(rf"\s*%{_IDENT} = load ptr, ptr %({_IDENT})(?:, align \d+)?\s*$")


def _uses(text: str, value: str) -> list[str]:
    """The lines of LLVM's printed function that mention the local `%value`."""
    token = re.compile(rf"%{re.escape(value)}(?![-\w$.])")
    return [line for line in text.splitlines() if token.search(line)]


def _argument_array_problem(text: str, arg: str, name: str, num_params: int) -> str | None:
    """On LLVM's own printing of the kernel: %args is only indexed at constants below
    `num_params`, and each slot only loaded from (a store, a call or arithmetic is refused)."""
    if not re.fullmatch(_IDENT, arg or ""):
        return f"@{name}'s argument array has no plain name"
    other = f"@{name} uses its argument array other than by loading pointers at constant indices"
    for line in _uses(text, arg)[1:]:  # the first is the `define` line
        m = _SLOT.match(line)
        if m is None or m.group(2) != arg:
            return other
        index = int(m.group(3))
        if not 0 <= index < num_params:
            return f"@{name} reads argument {index}; the manifest passes {num_params}"
        for use in _uses(text, m.group(1))[1:]:  # the first is the slot's own definition
            load = _LOAD.match(use)
            if load is None or load.group(1) != m.group(1):
                return other
    return None


# -- PTX -------------------------------------------------------------------------------------------
_PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_PTX_EXTERN_FUNC = re.compile(r"\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w$%.]+)")
_PTX_FUNC = re.compile(r"\.func\s+(?:\([^)]*\)\s*)?([\w$%.]+)")
_PTX_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([\w$%.]+)")


def check_ptx(ptx: str, name: str, num_params: int) -> None:
    text = _PTX_COMMENT.sub(" ", ptx)
    for callee in _PTX_EXTERN_FUNC.findall(text):
        if not ptx_may_declare(callee):
            raise KernelCheckError(f"its PTX declares the outside function {callee}, which the NVPTX "
                                   "lowering never calls")
    defined = {n for n in _PTX_FUNC.findall(text)} - set(_PTX_EXTERN_FUNC.findall(text))
    for callee in _PTX_CALL.findall(text):
        if callee.startswith("%"):
            raise KernelCheckError("its PTX calls through a register, which the NVPTX lowering never does")
        if callee not in defined and not ptx_may_declare(callee):
            raise KernelCheckError(f"its PTX calls {callee}, which is not a function of the same PTX")
    entry = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(([^)]*)\)", text)
    if entry is None:
        raise KernelCheckError(f"its PTX has no .entry {name}")
    params = [p for p in entry.group(1).split(",") if p.strip()]
    if len(params) != num_params:
        raise KernelCheckError(f".entry {name} takes {len(params)} parameters; the manifest passes "
                               f"{num_params}")
    for p in params:
        if not re.match(r"\s*\.param\s+\.(u64|b64|s64)\b", p):
            raise KernelCheckError(f".entry {name} has a parameter that is not a 64-bit pointer: "
                                   f"{' '.join(p.split())[:80]}")
