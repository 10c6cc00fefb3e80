"""One-pass machine code for the interpreter's bf16 bit work (generated with llvmlite, the project's LLVM).

Rounding an f32 array to bf16 precision on the bits takes five numpy passes plus a NaN check
(`narrow.round_bf16_in_place`), and the interpreter rounds after every bf16 op of an elementwise
region: in a bf16 softmax that was about a third of the run. The same arithmetic as one loop over
the elements, which LLVM vectorizes for the host's vector unit, reads and writes each element
once. Only moving and rounding bits and looking values up in a table are compiled; every op's
arithmetic stays numpy's (the interpreter is the reference, and the tables hold numpy's own
results: `region_kernels.bf16_table`). The rounding computes exactly what ml_dtypes' f32 -> bf16
conversion computes, bit for bit (`tests/unit/hlo_common/interpreter/test_interp_narrow.py`
checks every f32 bit pattern):

- a NaN becomes the quiet NaN 0x7FC0 with its sign (XLA's and ml_dtypes' rule);
- any other value gets 0x7FFF plus its lowest kept bit added to its bits, then the low 16 bits
  cleared: round to nearest even (`narrow.py` says why that holds through binades, overflow to
  infinity and subnormals).

`round_in_place(a)` rounds an f32 array in place; `round_into(out, a)` writes the bf16 bits of the
rounded values into a 16-bit array; `narrow_into(out, a)` writes the upper halves of f32 values
that are bf16 values already (exact: what numpy's shift does in a slower casting loop) and
`widen_into(out, a)` does the reverse (what ml_dtypes' bf16 -> f32 cast does); `lookup(out, a,
table)` replaces each bf16 value by its entry in a 65536-entry table. Each returns False without
doing anything when the code is unavailable (llvmlite missing or failing) or the arrays are not
contiguous, and the caller falls back to numpy. The code is compiled once per process, on the
first call (about 0.1 s), under a lock; calls go through ctypes, which releases the GIL, so the
interpreter's threads run them side by side.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

# One element loop per function (`_loop`), each a body over element %i of %n.
_LOOP = """define void @{name}({params}) {{
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
{body}
  %next = add nuw nsw i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done{metadata}
done:
  ret void
}}
"""


def _loop(name: str, params: str, body: str, metadata: str = "") -> str:
    return _LOOP.format(name=name, params=params, body=body.strip("\n"), metadata=metadata)


# The rounding of an f32's bits to bf16 (also used by `region_jit`'s loops).
ROUND_BITS = """
define internal i32 @round_bits(i32 %bits) alwaysinline {
  %magnitude = and i32 %bits, 2147483647
  %is_nan = icmp ugt i32 %magnitude, 2139095040
  %shifted = lshr i32 %bits, 16
  %lowest_kept = and i32 %shifted, 1
  %bias = add i32 %lowest_kept, 32767
  %sum = add i32 %bits, %bias
  %rounded = and i32 %sum, -65536
  %sign = and i32 %bits, -2147483648
  %quiet_nan = or i32 %sign, 2143289344
  %r = select i1 %is_nan, i32 %quiet_nan, i32 %rounded
  ret i32 %r
}
"""

_IR = "\n".join([
    _loop("round_in_place", "ptr noalias %p, i64 %n", """
  %at = getelementptr inbounds i32, ptr %p, i64 %i
  %bits = load i32, ptr %at, align 4
  %r = call i32 @round_bits(i32 %bits)
  store i32 %r, ptr %at, align 4
"""),
    _loop("round_into", "ptr noalias %out, ptr noalias %p, i64 %n", """
  %at = getelementptr inbounds i32, ptr %p, i64 %i
  %bits = load i32, ptr %at, align 4
  %r = call i32 @round_bits(i32 %bits)
  %high = lshr i32 %r, 16
  %half = trunc i32 %high to i16
  %to = getelementptr inbounds i16, ptr %out, i64 %i
  store i16 %half, ptr %to, align 2
"""),
    _loop("narrow_into", "ptr noalias %out, ptr noalias %p, i64 %n", """
  %at = getelementptr inbounds i32, ptr %p, i64 %i
  %bits = load i32, ptr %at, align 4
  %high = lshr i32 %bits, 16
  %half = trunc i32 %high to i16
  %to = getelementptr inbounds i16, ptr %out, i64 %i
  store i16 %half, ptr %to, align 2
"""),
    _loop("widen_into", "ptr noalias %out, ptr noalias %p, i64 %n", """
  %at = getelementptr inbounds i16, ptr %p, i64 %i
  %half = load i16, ptr %at, align 2
  %wide = zext i16 %half to i32
  %bits = shl i32 %wide, 16
  %to = getelementptr inbounds i32, ptr %out, i64 %i
  store i32 %bits, ptr %to, align 4
"""),
    _loop("lookup", "ptr %out, ptr %p, ptr noalias %table, i64 %n", """
  %at = getelementptr inbounds i32, ptr %p, i64 %i
  %bits = load i32, ptr %at, align 4
  %key = lshr i32 %bits, 16
  %index = zext i32 %key to i64
  %entry_at = getelementptr inbounds i32, ptr %table, i64 %index
  %value = load i32, ptr %entry_at, align 4
  %to = getelementptr inbounds i32, ptr %out, i64 %i
  store i32 %value, ptr %to, align 4
""", ", !llvm.loop !0"),
    ROUND_BITS,
    """
!0 = distinct !{!0, !1}
!1 = !{!"llvm.loop.vectorize.enable", i1 false}
"""])
# %is_nan: magnitude above 0x7F800000 (infinity); %quiet_nan: sign | 0x7FC00000. The lookup loop
# is kept scalar: this host's vector gathers are slower than one load per element.

_lock = threading.Lock()
_functions: tuple | None = None  # (round_in_place, round_into, narrow_into, widen_into, lookup), or ()
_keep: list = []  # the engine and module must outlive the function pointers


def compile_ir(ir: str):
    """An execution engine holding `ir` compiled for this host (kept alive for the process)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()

    def machine():
        return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                            features=llvm.get_host_cpu_features().flatten(), opt=3,
                                            codemodel="jitdefault")

    module = llvm.parse_assembly(ir)
    module.verify()
    tm = machine()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(module, pb)
    engine = llvm.create_mcjit_compiler(module, machine())  # the engine owns its machine
    engine.finalize_object()
    _keep.extend([engine, module])
    return engine


def _compile() -> tuple:
    engine = compile_ir(_IR)
    in_place = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("round_in_place"))
    into = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("round_into"))
    narrow = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("narrow_into"))
    widen = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("widen_into"))
    lookup = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("lookup"))
    return in_place, into, narrow, widen, lookup


def _get() -> tuple:
    global _functions
    if _functions is None:
        with _lock:
            if _functions is None:
                try:
                    _functions = _compile()
                except Exception:  # noqa: BLE001 - no usable LLVM: numpy does the rounding
                    _functions = ()
    return _functions


def available() -> bool:
    """True when the compiled functions can be used in this process."""
    return bool(_get())


def round_in_place(a: np.ndarray) -> bool:
    """Round the contiguous f32 array `a` to bf16 precision in place; False if not done."""
    fns = _get()
    if not fns or a.dtype != np.float32 or not a.flags.c_contiguous or not a.flags.writeable:
        return False
    fns[0](a.ctypes.data, a.size)
    return True


def round_into(out: np.ndarray, a: np.ndarray) -> bool:
    """Write the bf16 bits of contiguous f32 `a`, rounded, into the contiguous 16-bit array `out`
    (same shape, not overlapping `a`); False if not done."""
    return _into(1, out, a)


def narrow_into(out: np.ndarray, a: np.ndarray) -> bool:
    """Write the upper 16 bits of each element of contiguous f32 `a` (bf16 values: exact, NaN
    payloads kept) into the contiguous 16-bit array `out`; False if not done."""
    return _into(2, out, a)


def widen_into(out: np.ndarray, a: np.ndarray) -> bool:
    """Write the f32 values of the contiguous bf16 (16-bit) array `a` into the contiguous f32
    array `out` (the bits moved to the upper half: exact); False if not done."""
    fns = _get()
    if (not fns or out.dtype != np.float32 or a.dtype.itemsize != 2 or out.shape != a.shape
            or not (a.flags.c_contiguous and out.flags.c_contiguous and out.flags.writeable)):
        return False
    fns[3](out.ctypes.data, a.ctypes.data, a.size)
    return True


def lookup(out: np.ndarray, a: np.ndarray, table: np.ndarray) -> bool:
    """out[i] = table[upper 16 bits of a[i]] for contiguous f32 arrays `out` and `a` (the same
    array, or not overlapping) and a contiguous 65536-entry 32-bit `table`; False if not done."""
    fns = _get()
    if (not fns or a.dtype != np.float32 or out.dtype != np.float32 or out.shape != a.shape
            or table.dtype.itemsize != 4 or table.size != 1 << 16 or not table.flags.c_contiguous
            or not (a.flags.c_contiguous and out.flags.c_contiguous and out.flags.writeable)):
        return False
    fns[4](out.ctypes.data, a.ctypes.data, table.ctypes.data, a.size)
    return True


def _into(which: int, out: np.ndarray, a: np.ndarray) -> bool:
    fns = _get()
    if (not fns or a.dtype != np.float32 or out.dtype.itemsize != 2 or out.shape != a.shape
            or not (a.flags.c_contiguous and out.flags.c_contiguous and out.flags.writeable)):
        return False
    fns[which](out.ctypes.data, a.ctypes.data, a.size)
    return True
