"""Which outside functions a manifest's kernel code may name: the one list both sides read.

Where it sits: hlo-codegen's lowerings (`hlo_codegen.llvm.host`, `hlo_codegen.ptx`) check their own
output against it, so a new external call is added here or the compiler refuses it; hlo-run
(`hlo_run.kernel_check`) refuses a manifest whose code names anything else before any kernel
runs. A manifest is executable code, like a shared library: its checksum guards against
corruption, not tampering, and this list is what keeps a re-hashed manifest from reaching the
C library (`system`, `dlopen`, ...) through the host JIT.

Host LLVM IR (`--target host`): LLVM intrinsics (`llvm.*`), except the few that reach beyond the
kernel's arithmetic and memory - registers, return and frame addresses, trampolines, the
instruction cache, target-specific intrinsics (the host lowering emits only generic ones) - and
the functions of `HOST_EXTERNAL_FUNCTIONS`. That set is empty: the lowering defines its math
(exp, log, tanh, erf, ...) inside every module (`hlo_codegen/llvm/math.py`), so a host kernel
needs nothing from libm or libc.

PTX (`--target cuda`): no `.extern .func` at all, since libdevice's functions are linked into the
PTX (`hlo_codegen/ptx.py`) and printf, malloc or `__assertfail` are never called; every `call`
names a `.func` of the same PTX.
"""

from __future__ import annotations

INTRINSIC_PREFIX = "llvm."

# Non-intrinsic functions a host kernel's LLVM IR may declare and call (see the module docstring).
HOST_EXTERNAL_FUNCTIONS: frozenset[str] = frozenset()

# Intrinsic families no lowering emits and that reach outside a kernel's own computation.
REFUSED_INTRINSIC_PREFIXES = (
    "llvm.read_register", "llvm.write_register", "llvm.read_volatile_register",
    "llvm.returnaddress", "llvm.addressofreturnaddress", "llvm.frameaddress", "llvm.sponentry",
    "llvm.stacksave", "llvm.stackrestore", "llvm.stackprotector", "llvm.localescape",
    "llvm.localrecover", "llvm.init.trampoline", "llvm.adjust.trampoline", "llvm.clear_cache",
    "llvm.eh.", "llvm.seh.", "llvm.coro.", "llvm.experimental.gc", "llvm.experimental.patchpoint",
    "llvm.experimental.stackmap", "llvm.instrprof.", "llvm.call.preallocated",
    "llvm.x86.", "llvm.aarch64.", "llvm.arm.", "llvm.ppc.", "llvm.riscv.", "llvm.s390.",
    "llvm.wasm.", "llvm.amdgcn.", "llvm.nvvm.", "llvm.loongarch.", "llvm.mips.",
)

# Non-intrinsic functions NVPTX kernel code may declare (`.extern .func`): none.
PTX_EXTERNAL_FUNCTIONS: frozenset[str] = frozenset()


def host_may_declare(name: str) -> bool:
    """Whether host kernel IR may declare (and so call) the function `name`."""
    if name in HOST_EXTERNAL_FUNCTIONS:
        return True
    return name.startswith(INTRINSIC_PREFIX) and not name.startswith(REFUSED_INTRINSIC_PREFIXES)


def ptx_may_declare(name: str) -> bool:
    """Whether PTX may declare the external function `name` (`.extern .func`)."""
    return name in PTX_EXTERNAL_FUNCTIONS


def allowed_host_text() -> str:
    """The rule in a few words, for error messages."""
    extra = f" and {', '.join(sorted(HOST_EXTERNAL_FUNCTIONS))}" if HOST_EXTERNAL_FUNCTIONS else ""
    return f"only LLVM intrinsics{extra}"
