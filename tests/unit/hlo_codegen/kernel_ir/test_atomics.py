"""The kernel IR's `atomic_rmw`: text form, verifier, transforms, and its lowering - native
`atomicrmw` where the combiner is one (NVPTX: `atom.global.add.f32`, `.add.noftz.bf16`, ...),
a compare-and-swap loop otherwise (any combiner, packed sub-byte elements, f16/bf16 on the
host) - run on the host with blocks on several CPU threads and compared with numpy.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_codegen.indexing import parse_indexing_map
from hlo_codegen.kernel_ir import (
    Buffer, FunctionBuilder, IRBuilder, Kernel, parse_kernel, print_kernel, verify_kernel,
)
from hlo_codegen.kernel_ir.transforms import optimize_kernel
from hlo_codegen.llvm import lower_to_host, lower_to_nvptx
from hlo_codegen.ptx import compile_to_ptx
from hlo_common.errors import VerificationError
from hlo_run.host_kernel import load_host_kernel

THREADS, BLOCKS, SLOTS = 64, 8, 4


def atomic_kernel(hlo_type: str, t: str, op: str, kind: str | None, packed: bool = False) -> Kernel:
    """Thread g (of BLOCKS * THREADS) combines in[g] into out[g % SLOTS] with `op`."""
    k = Kernel("atomics", (BLOCKS, 1, 1), (THREADS, 1, 1))
    k.buffers += [Buffer("arg0", "param", hlo_type, THREADS * BLOCKS),
                  Buffer("arg1", "param", hlo_type, SLOTS, written=True, packed=packed)]
    fb = FunctionBuilder(k, "comb", [t, t], [t], ["cur", "upd"])
    if t in ("bf16", "f16"):  # narrow floats compute in f32, as the elemental emitter does
        wide = [fb.cast("extf", a, "f32") for a in fb.function.args]
        fb.return_([fb.cast("truncf", fb.binary(op, *wide), t)])
    else:
        fb.return_([fb.binary(op, *fb.function.args)])
    b = IRBuilder(k)
    th, bl = b.thread_id("x", THREADS), b.block_id("x", BLOCKS)
    domain = f"th_x in [0, {THREADS - 1}], bl_x in [0, {BLOCKS - 1}]"
    g, slot = b.apply_indexing(parse_indexing_map(
        f"(th_x, bl_x) -> (bl_x * {THREADS} + th_x, th_x mod {SLOTS}), domain: {domain}"), [th, bl])
    b.atomic_rmw("arg1", slot, b.load("arg0", g, t), fb.function, kind)
    optimize_kernel(k)
    verify_kernel(k)
    return k


def run_host(kernel: Kernel, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    load_host_kernel(lower_to_host(kernel), kernel.name)([x, out], BLOCKS, threads=4)
    return out


def by_slot(x: np.ndarray) -> list[np.ndarray]:
    return [x[s::SLOTS] for s in range(SLOTS)]


def test_text_round_trip_and_combiner_kept_as_a_function() -> None:
    k = atomic_kernel("f32", "f32", "addf", "addf")
    text = print_kernel(k)
    assert "atomic_rmw @arg1 @comb %" in text and "{kind = addf}" in text
    assert print_kernel(parse_kernel(text)) == text
    assert [f.name for f in k.functions] == ["comb"]  # called by the atomic: never inlined or dropped


def test_verifier_rejects_bad_atomics() -> None:
    k = atomic_kernel("f32", "f32", "addf", "addf")
    rmw = next(op for op in k.body.walk() if op.name == "atomic_rmw")
    rmw.attrs["kind"] = "mulf"
    with pytest.raises(VerificationError, match="unknown atomic kind mulf"):
        verify_kernel(k)
    rmw.attrs["kind"] = "addf"
    rmw.attrs["buffer"] = "arg0"
    with pytest.raises(VerificationError, match="read-only buffer @arg0"):
        verify_kernel(k)
    k = atomic_kernel("s32", "i32", "addi", None)
    rmw = next(op for op in k.body.walk() if op.name == "atomic_rmw")
    rmw.operands[1] = rmw.operands[0]  # an index value where an i32 belongs
    with pytest.raises(VerificationError, match=r"combiner @comb must map \(index, index\) -> index"):
        verify_kernel(k)


def test_native_float_add_on_the_host() -> None:
    x = np.random.default_rng(1).standard_normal(THREADS * BLOCKS).astype(np.float32)
    got = run_host(atomic_kernel("f32", "f32", "addf", "addf"), x, np.ones(SLOTS, np.float32))
    want = np.array([1 + s.astype(np.float64).sum() for s in by_slot(x)])
    np.testing.assert_allclose(got, want, rtol=1e-5)  # summed in another order


def test_cas_loop_for_multiply_is_exact() -> None:
    x = (np.arange(THREADS * BLOCKS, dtype=np.int64) * 2654435761 % (1 << 31)).astype(np.int32) | 1
    got = run_host(atomic_kernel("s32", "i32", "muli", None), x, np.full(SLOTS, 3, np.int32))
    want = [np.multiply.reduce(s.astype(np.int64) % (1 << 32), dtype=np.uint64) for s in by_slot(x)]
    want = np.array([(3 * int(w)) % (1 << 32) for w in want], np.uint64).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(got, want)


def test_bf16_add_through_cas_on_the_host() -> None:
    x = np.random.default_rng(2).integers(-8, 8, THREADS * BLOCKS).astype(ml_dtypes.bfloat16)
    ir = lower_to_host(atomic_kernel("bf16", "bf16", "addf", "addf"))
    assert "cmpxchg ptr" in ir and "atomicrmw" not in ir
    got = run_host(atomic_kernel("bf16", "bf16", "addf", "addf"), x.view(np.uint16),
                   np.zeros(SLOTS, np.uint16)).view(ml_dtypes.bfloat16)
    want = [s.astype(np.float32).sum() for s in by_slot(x)]  # small integers: exact in any order
    np.testing.assert_array_equal(got.astype(np.float32), want)


def test_packed_s4_cas_on_the_byte() -> None:
    x = np.random.default_rng(3).integers(-8, 8, THREADS * BLOCKS).astype(np.int8)
    out = np.array([0x21, 0x43], np.uint8)  # elements 1, 2, 3, 4 (low nibble first)
    got = run_host(atomic_kernel("s4", "i4", "addi", "addi", packed=True), x, out)
    nibbles = [(got[i // 2] >> (4 * (i % 2))) & 0xF for i in range(SLOTS)]
    want = [(s.astype(np.int64).sum() + i + 1) % 16 for i, s in enumerate(by_slot(x))]
    assert nibbles == want


def test_pred_or_is_native() -> None:
    x = np.zeros(THREADS * BLOCKS, np.uint8)
    x[5] = 1  # slot 1 only
    k = atomic_kernel("pred", "i1", "ori", "ori")
    assert "atomicrmw or ptr" in lower_to_host(k)
    np.testing.assert_array_equal(run_host(k, x, np.zeros(SLOTS, np.uint8)), [0, 1, 0, 0])


@pytest.mark.parametrize("hlo_type,t,op,kind,want", [
    ("f32", "f32", "addf", "addf", "atom.global.add.f32"),
    ("f64", "f64", "addf", "addf", "atom.global.add.f64"),
    ("bf16", "bf16", "addf", "addf", "atom.global.add.noftz.bf16"),
    ("f16", "f16", "addf", "addf", "atom.global.add.noftz.f16"),
    ("s32", "i32", "maxsi", "maxsi", "atom.global.max.s32"),
    ("u64", "i64", "minui", "minui", "atom.global.min.u64"),
    ("s32", "i32", "muli", None, "atom.global.cas.b32"),
    ("f32", "f32", "maximumf", None, "atom.global.cas.b32"),
    ("s8", "i8", "addi", "addi", "atom.global.cas.b32"),  # LLVM widens 8-bit atomics to a 32-bit CAS
])
def test_nvptx_atomics_in_ptx(hlo_type: str, t: str, op: str, kind: str | None, want: str) -> None:
    ptx = compile_to_ptx(lower_to_nvptx(atomic_kernel(hlo_type, t, op, kind), use_libdevice=False), "sm_90")
    atoms = [line.strip() for line in ptx.splitlines() if "atom." in line or "red." in line]
    assert any(want in a.replace(".relaxed.gpu", "") for a in atoms), atoms
    assert not any(".sys" in a for a in atoms), atoms  # device scope: one GPU
