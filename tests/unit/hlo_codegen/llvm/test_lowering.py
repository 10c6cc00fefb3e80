"""The LLVM lowering: host phase splitting at `sync_threads` / `shuffle_reduce` (checked against a
numpy emulation of the GPU's shfl.sync.down semantics), the NVPTX form of the same kernel, the
host launcher, and lowering errors.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from filecheck_util import check_text
from hlo_codegen.indexing import parse_indexing_map
from hlo_codegen.kernel_ir import Buffer, FunctionBuilder, IRBuilder, Kernel, parse_kernel, print_kernel
from hlo_codegen.llvm import LoweringError, lower_to_host, lower_to_nvptx
from hlo_codegen.llvm.host import _KernelLowering
from hlo_codegen.llvm.lane0 import lane0_only
from hlo_run.host_kernel import HostKernelError, compile_host_module, load_host_kernel
from shuffle_reduction import BLOCKS, THREADS, emulate, reduction_kernel

@pytest.mark.parametrize("etype", ["f32", "s32"])
def test_host_phases_match_gpu_shuffle_semantics(etype: str) -> None:
    kernel = reduction_kernel(etype)
    text = print_kernel(kernel)
    assert print_kernel(parse_kernel(text)) == text
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(THREADS * BLOCKS) * 100).astype(np.float32 if etype == "f32" else np.int32)
    lanes, totals = np.zeros_like(x), np.zeros(BLOCKS, x.dtype)
    load_host_kernel(lower_to_host(kernel), kernel.name)([x, lanes, totals], BLOCKS)
    want_lanes, want_totals = emulate(x)
    np.testing.assert_array_equal(lanes, want_lanes)  # the same tree: bitwise equal floats
    np.testing.assert_array_equal(totals, want_totals)


def test_host_shuffle_computes_only_lane_0_when_only_lane_0_reads_it() -> None:
    """When every use of a shuffle's result is under `th_x % 32 == 0`, the host computes only the
    lanes lane 0 depends on (lanes [0, d) at step d): the steps by 16 and 8 as loops over those
    lanes, the last three as one straight-line tree per warp (4 + 2 + 1 reducer calls); same
    totals, bit for bit, as the full tree."""
    guarded, full = reduction_kernel("f32", lanes_out=False), reduction_kernel("f32")
    shuffle = next(op for op in guarded.body.ops if op.name == "shuffle_reduce")
    assert lane0_only(guarded, shuffle)
    assert not lane0_only(full, next(op for op in full.body.ops if op.name == "shuffle_reduce"))
    ir = lower_to_host(guarded)
    calls, lane_loops = re.compile(r"call float @add\("), re.compile(r"^l_loop[.0-9]*:", re.M)
    assert len(lane_loops.findall(ir)) == 2 and len(calls.findall(ir)) == 2 + 7
    assert not lane_loops.findall(lower_to_host(full)) and len(calls.findall(lower_to_host(full))) == 5
    x = (np.random.default_rng(4).standard_normal(THREADS * BLOCKS) * 100).astype(np.float32)
    lanes, totals = np.zeros_like(x), np.zeros(BLOCKS, x.dtype)
    load_host_kernel(ir, guarded.name)([x, lanes, totals], BLOCKS)
    np.testing.assert_array_equal(totals, emulate(x)[1])
    wide = reduction_kernel("f32", lanes_out=False)
    wide.block = (16, 4, 1)  # lane 0 of a warp is no longer th_x % 32 == 0
    assert not lane0_only(wide, next(op for op in wide.body.ops if op.name == "shuffle_reduce"))


def test_host_phase_under_a_lane_0_guard_runs_only_those_threads(monkeypatch) -> None:
    """A phase that does nothing outside `if th_x % 32 == 0` (`th_x == 0`) loops over threads
    0, 32, ... (thread 0) alone; one that also stores for every thread, or whose `if` has an else
    branch with work, keeps the loop over all threads, as does `th_x % 32 == 0` in a block 16 wide.
    Results bit for bit those of the loop over all threads."""
    guarded, full = reduction_kernel("f32", lanes_out=False), reduction_kernel("f32")
    narrow = reduction_kernel("f32", lanes_out=False)
    narrow.block = (16, 4, 1)  # th_x % 32 == 0 is no longer every 32nd thread; th_x == 0 is t % 16
    with_else = reduction_kernel("f32", lanes_out=False)
    guard = next(op for op in with_else.body.ops if op.name == "if")
    guard.regions[1].ops.insert(0, next(op for op in guard.regions[0].ops if op.name == "store"))
    lane0_loops = re.compile(r"^lane0_loop[.0-9]*:", re.M)
    x = (np.random.default_rng(5).standard_normal(THREADS * BLOCKS) * 100).astype(np.float32)

    def run(kernel: Kernel) -> tuple[int, np.ndarray]:
        ir = lower_to_host(kernel, verify=False)
        lanes, totals = np.zeros_like(x), np.zeros(BLOCKS, x.dtype)
        load_host_kernel(ir, kernel.name)([x, lanes, totals], BLOCKS)
        return len(lane0_loops.findall(ir)), totals

    found = {name: run(k) for name, k in
             (("guarded", guarded), ("full", full), ("narrow", narrow), ("with_else", with_else))}
    assert {name: n for name, (n, _) in found.items()} == {
        "guarded": 2, "full": 1, "narrow": 1, "with_else": 1}  # warps' partials; thread 0's total
    np.testing.assert_array_equal(found["guarded"][1], emulate(x)[1])
    monkeypatch.setattr(_KernelLowering, "_lane0_phase_stride", lambda self, ops: None)
    for name, kernel in (("guarded", guarded), ("full", full), ("narrow", narrow)):
        loops, totals = run(kernel)
        assert loops == 0
        np.testing.assert_array_equal(found[name][1], totals)


def test_host_kernel_splits_blocks_across_threads() -> None:
    kernel = reduction_kernel("s32")
    x = np.arange(THREADS * BLOCKS, dtype=np.int32)
    lanes, totals = np.zeros_like(x), np.zeros(BLOCKS, np.int32)
    load_host_kernel(lower_to_host(kernel), kernel.name)([x, lanes, totals], BLOCKS, threads=2)
    np.testing.assert_array_equal(totals, emulate(x)[1])


def test_host_lowering_spills_only_what_crosses_phases() -> None:
    ir = lower_to_host(reduction_kernel("f32"))
    check_text(ir, """
; CHECK: define void @block_sum(ptr %args, i64 %block_begin, i64 %block_end)
; CHECK-DAG: alloca [256 x i8]
; CHECK-DAG: alloca [8 x i8]
; CHECK-DAG: alloca [64 x float]
; CHECK: blocks:
""")
    # x (phase 0) is spilled for phase 3; thread ids and constants are recomputed.
    assert ir.count("alloca [64 x float]") == 3  # x, the shuffle operand and its result
    assert ir.count("alloca [80 x float]") == 1  # the shuffle's scratch, with 16 spare slots
    assert "alloca [64 x i64]" not in ir


def test_nvptx_form_of_the_same_kernel() -> None:
    ir = lower_to_nvptx(reduction_kernel("f32"), use_libdevice=False)
    check_text(ir, """
; CHECK: target triple = "nvptx64-nvidia-cuda"
; CHECK: @tile = internal addrspace(3) global [256 x i8] undef, align 16
; CHECK: define ptx_kernel void @block_sum(ptr addrspace(1) noalias align 16 %arg0, ptr addrspace(1) noalias align 16 %arg1, ptr addrspace(1) noalias align 16 %arg2)
; CHECK: call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
; CHECK: call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
; CHECK: call void @llvm.nvvm.barrier0()
; CHECK: call i32 @llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %{{.*}}, i32 16, i32 31)
; CHECK: call float @add(
; CHECK: call i32 @llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %{{.*}}, i32 1, i32 31)
""")


def test_shuffle_of_64_bit_and_complex_values_on_nvptx() -> None:
    k = Kernel("k", (1, 1, 1), (32, 1, 1))
    k.buffers += [Buffer("arg0", "param", "c64", 32, written=True),
                  Buffer("arg1", "param", "f64", 32, written=True)]
    f = FunctionBuilder(k, "red", ["complex<f32>", "f64", "complex<f32>", "f64"], ["complex<f32>", "f64"])
    a, c, bb, d = f.function.args
    f.return_([f.op("complex.add", [a, bb], ["complex<f32>"]).result, f.binary("addf", c, d)])
    b = IRBuilder(k)
    th = b.thread_id("x", 32)
    v = b.load("arg0", th, "complex<f32>")
    w = b.load("arg1", th, "f64")
    r = b.shuffle_reduce(f.function, [v, w], max_distance=4)
    b.store("arg0", r[0], th)
    b.store("arg1", r[1], th)
    ir = lower_to_nvptx(k)
    assert ir.count("llvm.nvvm.shfl.sync.down.i32(i32 -1") == 3 * 4  # 2 floats + 2 halves, 3 steps
    z = (np.arange(32) + 1j * np.arange(32)).astype(np.complex64)
    y = np.arange(32, dtype=np.float64)
    load_host_kernel(lower_to_host(k), "k")([z, y], 1)
    want = np.arange(32, dtype=np.float64)
    for dist in (4, 2, 1):
        other = want.copy()
        other[:32 - dist] = want[dist:]
        want = want + other
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(z.real, want)


def test_loop_with_iter_args_and_constraints() -> None:
    # Sum over j < i of j (a triangular domain by a constraint), one thread per i.
    k = Kernel("tri", (1, 1, 1), (10, 1, 1))
    k.buffers.append(Buffer("arg0", "param", "s64", 10, written=True))
    b = IRBuilder(k)
    th = b.thread_id("x", 10)
    m = parse_indexing_map("(d0)[s0] -> (s0), domain: d0 in [0, 9], s0 in [0, 9], d0 - s0 in [1, 9]")
    zero = b.constant(0, "i64")
    (total,) = b.loop(m, [th], [zero],
                      lambda s, idx, it: [b.binary("addi", it[0], b.cast("index_cast", idx[0], "i64"))])
    b.store("arg0", total, th)
    out = np.zeros(10, np.int64)
    load_host_kernel(lower_to_host(k), "tri")([out], 1)
    np.testing.assert_array_equal(out, [i * (i - 1) // 2 for i in range(10)])


def test_packed_sub_byte_stores_read_modify_write() -> None:
    k = Kernel("pack", (1, 1, 1), (1, 1, 1))
    k.buffers.append(Buffer("arg0", "param", "s4", 6, written=True, packed=True))
    b = IRBuilder(k)
    for i, v in enumerate([1, -2, 3, -8, 7, 0]):
        b.store("arg0", b.constant(v, "i4"), b.index(i))
    out = np.full(3, 0xFF, np.uint8)
    load_host_kernel(lower_to_host(k), "pack")([out], 1)
    assert list(out) == [0xE1, 0x83, 0x07]


def test_lowering_errors_name_the_kernel() -> None:
    k = Kernel("bad", (1, 1, 1), (1, 1, 1))
    k.buffers.append(Buffer("arg0", "param", "bf16", 1, written=True))
    b = IRBuilder(k)
    x = b.constant(1.0, "bf16")
    b.store("arg0", b.unary("exp", x), b.index(0))
    with pytest.raises(LoweringError, match="exp on bf16: compute narrow floats in f32"):
        lower_to_host(k)


def test_host_kernel_errors() -> None:
    with pytest.raises(HostKernelError, match="invalid LLVM IR"):
        compile_host_module("define void @f( {")
    ir = "define void @k(ptr %a, i64 %b, i64 %e) {\nentry:\n  ret void\n}\n"
    with pytest.raises(HostKernelError, match="@missing is not defined"):
        load_host_kernel(ir, "missing")
    with pytest.raises(HostKernelError, match="C-contiguous"):
        load_host_kernel(ir, "k")([np.zeros((4, 4))[:, 1]], 1)
    assert compile_host_module(ir) is compile_host_module(ir)  # cached by text


def test_function_named_like_the_kernel() -> None:
    k = Kernel("add", (1, 1, 1), (4, 1, 1))
    k.buffers.append(Buffer("arg0", "param", "s32", 4, written=True))
    f = FunctionBuilder(k, "add", ["i32", "i32"], ["i32"])
    f.return_([f.binary("addi", *f.function.args)])
    b = IRBuilder(k)
    th = b.thread_id("x", 4)
    v = b.cast("index_cast", th, "i32")
    b.store("arg0", b.call(f.function, [v, v])[0], th)
    out = np.zeros(4, np.int32)
    load_host_kernel(lower_to_host(k), "add")([out], 1)
    assert list(out) == [0, 2, 4, 6] and "define ptx_kernel void @add(" in lower_to_nvptx(k)


@pytest.mark.parametrize("op, interleaved", [("exp", True), ("tanh", True), ("negf", False)])
def test_thread_loops_with_long_math_are_vectorized_two_vectors_deep(op: str, interleaved: bool) -> None:
    """A phase that computes an inline polynomial (exp, tanh, ...) asks LLVM for an interleave count
    of 2: its own choice for such bodies spilled on 16-register AVX2 cores. Other loops keep
    LLVM's choice. Both compute the same values."""
    k = parse_kernel(f"""kernel @k grid = [1, 1, 1] block = [128, 1, 1] {{
  param @arg0 : f32[128]
  param @arg1 : f32[128] written
  %th_x = thread_id {{dim = x, range = [0, 127]}} : index
  %0 = load @arg0 %th_x : f32
  %1 = {op} %0 : f32
  store @arg1 %1, %th_x
}}
""")
    ir = lower_to_host(k)
    assert ('!"llvm.loop.interleave.count", i32 2' in ir) == interleaved
    x = np.linspace(-3, 3, 128, dtype=np.float32)
    out = np.empty_like(x)
    load_host_kernel(ir, "k")([x, out], 1)
    want = {"exp": np.exp, "tanh": np.tanh, "negf": np.negative}[op](x.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=3e-7, atol=0)
