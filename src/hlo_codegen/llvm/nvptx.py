"""NVPTX lowering: the kernel IR as an LLVM `ptx_kernel` for `nvptx64-nvidia-cuda`.

Where it sits: `lower_to_nvptx(kernel)` gives LLVM IR text; ptx.py turns it into PTX with
llvmlite's NVPTX target machine (linking libdevice when the IR calls `__nv_*` functions) and
validates it as a cubin with nvJitLink.

Kernel ABI: `define ptx_kernel void @<name>(ptr addrspace(1) noalias align 16 %arg0, ...)`,
one pointer per kernel parameter in order (the fusion's operands, then its outputs; aliasing
arguments were merged by the emitter). Thread and block ids come from
`llvm.nvvm.read.ptx.sreg.{tid,ctaid}.{x,y,z}`, shared memory is `addrspace(3)` globals,
`sync_threads` is `llvm.nvvm.barrier0`, `shuffle_reduce` is a butterfly of
`llvm.nvvm.shfl.sync.down.i32` (64-bit values in two halves) calling the reducer after each
step. Math calls libdevice (`__nv_expf`, ...) when it is found (libdevice.py), else math.py.
"""

from __future__ import annotations

from hlo_codegen.kernel_ir.ir import Kernel, Op, buffer_bytes
from hlo_codegen.kernel_ir.verifier import verify_kernel
from hlo_codegen.llvm.libdevice import LIBDEVICE_FUNCTIONS, find_libdevice
from hlo_codegen.llvm.lowering import I64, LoweringError, ModuleLowering, RegionLowering, Target, llvm_type
from hlo_codegen.llvm.text import LV, LLFunction

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
NVPTX_DATALAYOUT = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"


class NvptxTarget(Target):
    name = "nvptx"
    triple = NVPTX_TRIPLE
    datalayout = NVPTX_DATALAYOUT
    global_ptr = "ptr addrspace(1)"
    shared_ptr = "ptr addrspace(3)"
    global_addrspace = 1
    invariant_loads = True
    native_half = True
    half_atomics = True
    atomic_scope = ' syncscope("device")'  # one GPU's kernel: .gpu scope, cheaper than .sys

    def __init__(self, use_libdevice: bool):
        self.use_libdevice = use_libdevice

    def math(self, rl: RegionLowering, op: str, ty: str, args: list[LV]) -> LV:
        base = LIBDEVICE_FUNCTIONS.get(op)
        if not self.use_libdevice or base is None:
            return super().math(rl, op, ty, args)
        name = f"__nv_{base}f" if ty == "float" else f"__nv_{base}"
        rl.module.declare(name, ty, [a.ty for a in args])
        return rl.fn.call(ty, name, args)

    def _sreg(self, rl: RegionLowering, reg: str, dim: str) -> LV:
        raw = rl.fn.intrinsic(f"llvm.nvvm.read.ptx.sreg.{reg}.{dim}", "i32", [])
        return rl.fn.cast("zext", raw, I64)

    def thread_id(self, rl: RegionLowering, dim: str) -> LV:
        return self._sreg(rl, "tid", dim)

    def block_id(self, rl: RegionLowering, dim: str) -> LV:
        return self._sreg(rl, "ctaid", dim)


def _shuffle(f: LLFunction, v: LV, distance: int) -> LV:
    """`shfl.sync.down` of any value: split into 32-bit pieces."""
    ty = v.ty
    if ty.startswith("{"):
        parts = [p.strip() for p in ty.strip("{} ").split(",")]
        out = LV(ty, "undef")
        for i, pty in enumerate(parts):
            out = f.insertvalue(out, _shuffle(f, f.extractvalue(pty, v, i), distance), i)
        return out
    bits = {"float": 32, "double": 64}.get(ty) or int(ty[1:])
    args = [LV("i32", "-1"), None, LV("i32", str(distance)), LV("i32", "31")]
    if bits == 64:
        halves = f.cast("bitcast", v, "<2 x i32>")
        out = LV("<2 x i32>", "undef")
        for i in range(2):
            piece = f.extractelement("i32", halves, LV("i32", str(i)))
            args[1] = piece
            shuffled = f.intrinsic("llvm.nvvm.shfl.sync.down.i32", "i32", args)
            out = f.insertelement(out, shuffled, LV("i32", str(i)))
        return f.cast("bitcast", out, ty)
    if bits > 64:
        raise LoweringError(f"cannot shuffle a {ty}")
    word = f.cast("bitcast", v, "i32") if ty == "float" else f.cast("zext", v, "i32")
    args[1] = word
    shuffled = f.intrinsic("llvm.nvvm.shfl.sync.down.i32", "i32", args)
    return f.cast("bitcast", shuffled, ty) if ty == "float" else f.cast("trunc", shuffled, ty)


def _lower_shuffle_reduce(rl: RegionLowering, op: Op) -> None:
    f = rl.fn
    reducer = rl.ml.kernel.function(op.attrs["callee"])
    types = [llvm_type(r.type) for r in op.results]
    values = [rl.v(x) for x in op.operands]
    distance = int(op.attrs.get("max_distance", 16))
    while distance >= 1:
        other = [_shuffle(f, v, distance) for v in values]
        args = [rl.buffers[p.name] for p in rl.ml.params] + values + other
        ret = types[0] if len(types) == 1 else "{ " + ", ".join(types) + " }"
        out = f.call(ret, rl.ml.symbols[reducer.name], args)
        values = [out] if len(types) == 1 else [f.extractvalue(t, out, i) for i, t in enumerate(types)]
        distance //= 2
    rl.bind(op.results, values)


def lower_to_nvptx(kernel: Kernel, use_libdevice: bool | None = None, verify: bool = True) -> str:
    """LLVM IR text of `kernel` for NVPTX. `use_libdevice=None`: use it when it can be found."""
    if verify:
        verify_kernel(kernel)
    if use_libdevice is None:
        use_libdevice = find_libdevice() is not None
    ml = ModuleLowering(kernel, NvptxTarget(use_libdevice))
    ml.lower_functions()
    params = [(NvptxTarget.global_ptr, p.name) for p in kernel.params]
    fn = ml.module.function(kernel.name, "void", params, prefix="ptx_kernel",
                            param_attrs=["noalias align 16"] * len(params))
    buffers = {p.name: a for p, a in zip(kernel.params, fn.args)}
    for b in kernel.buffers:
        if b.kind == "shared":
            ml.module.globals.append(
                f"@{b.name} = internal addrspace(3) global [{max(1, buffer_bytes(b))} x i8] undef, align 16")
            buffers[b.name] = LV(NvptxTarget.shared_ptr, f"@{b.name}")
    rl = RegionLowering(ml, fn, buffers)
    for op in kernel.body.ops:
        if op.name == "sync_threads":
            fn.intrinsic("llvm.nvvm.barrier0", "void", [])
        elif op.name == "shuffle_reduce":
            _lower_shuffle_reduce(rl, op)
        else:
            rl.lower_op(op)
    fn.ret()
    return ml.text()
