"""The loop emitter: XLA's launch rules and numbers, the printed kernel IR (FileCheck style, the
seed's GELU example), multi-output fusions, argument deduplication, vectorization decisions,
and the errors for fusions outside its domain. Kernels run on the host against the interpreter.
"""

from __future__ import annotations

import numpy as np
import pytest

from filecheck_util import check_text
from hlo_codegen.emitters import (
    A100, H100, EmitterError, LoopFusion, emit_kernel, emitter_kind, get_fusion_emitter,
)
from hlo_codegen.emitters.launch import loop_fusion_unroll_factor, loop_launch_dimensions, split_grid_x
from hlo_codegen.kernel_ir import print_kernel
from elemental_harness import check_fusion, fusion_of, gelu, random_args, reference, run_on_host

def test_gelu_kernel_reads_like_the_seed() -> None:
    kernel = emit_kernel(fusion_of(gelu("6,512,4096")))
    assert kernel.grid == (24576, 1, 1) and kernel.block == (128, 1, 1)
    assert kernel.name == "loop_multiply_fusion" and not kernel.functions
    text = print_kernel(kernel)
    check_text(text, """
// CHECK: #[[OUTER:map[0-9]+]] = (th_x, bl_x) -> (), domain: th_x in [0, 127], bl_x in [0, 24575]
// CHECK: #[[BASE:map[0-9]+]] = (th_x, bl_x) -> (th_x * 4 + bl_x * 512)
// CHECK: #[[MAP:map[0-9]+]] = (th_x, bl_x)[unroll_id] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + unroll_id), domain: th_x in [0, 127], bl_x in [0, 24575], unroll_id in [0, 3]
// CHECK: kernel @loop_multiply_fusion grid = [24576, 1, 1] block = [128, 1, 1]
// CHECK-NEXT: param @arg0 : bf16[12582912]
// CHECK-NEXT: param @arg1 : bf16[12582912] written
// CHECK: %th_x = thread_id
// CHECK: %bl_x = block_id
// CHECK: loop #[[OUTER]] (%th_x, %bl_x) -> () {
// CHECK-NEXT: %[[I:.*]] = apply_indexing #[[BASE]] %th_x, %bl_x : index
// CHECK-NEXT: %[[V:.*]] = load @arg0 %[[I]] {align = 8} : vector<4xbf16>
// CHECK: loop #[[MAP]] (%th_x, %bl_x)[%unroll_id] -> (%d0, %d1, %d2) iter_args
// CHECK: vector.extract %[[V]], %unroll_id : bf16
// CHECK: mulf
// CHECK: tanh
// CHECK: vector.insert
// CHECK: yield
// CHECK: store @arg1 %{{.*}}, %[[I]] {align = 8}
""")
    assert text.count("loop #") == 2 and text.count("tanh") == 1 and "call" not in text


def test_gelu_numbers() -> None:
    fusion = fusion_of(gelu("2,64,4096"))
    emitter = get_fusion_emitter(fusion)
    assert emitter.unroll_factor == 4 and "vector<4xbf16>" in print_kernel(emitter.emit())
    check_fusion(fusion)


# -- launch dimensions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,device,unroll,threads,blocks", [
    ("f32[]", H100, 1, (1, 1, 1), (1, 1, 1)),
    ("f32[20]", H100, 1, (20, 1, 1), (1, 1, 1)),
    ("f32[20,40,300]", H100, 1, (128, 1, 1), (1875, 1, 1)),  # 240000 < 2048 * 132
    ("f32[20,40,300]", A100, 4, (128, 1, 1), (469, 1, 1)),  # 240000 >= 2048 * 108
    ("bf16[6,512,4096]", H100, 4, (128, 1, 1), (24576, 1, 1)),  # the seed's GELU
    ("f32[270338]", H100, 2, (128, 1, 1), (1057, 1, 1)),  # 2 divides it, 4 does not
    ("f32[270337]", H100, 1, (128, 1, 1), (2113, 1, 1)),  # odd: no unroll
    ("pred[1000]", H100, 1, (128, 1, 1), (8, 1, 1)),  # pred counts as 8 bits
    ("s4[3]", H100, 2, (2, 1, 1), (1, 1, 1)),  # sub-byte outputs: whole bytes per thread
    ("u2[256]", H100, 4, (64, 1, 1), (1, 1, 1)),
    ("bf16[24,2048,2048,3,4096]", H100, 4, (128, 1, 1), (1207959552, 2, 1)),  # split x into x*y
])
def test_launch_dimensions(shape: str, device, unroll: int, threads, blocks) -> None:
    fusion = fusion_of(f"f {{ p = {shape} parameter(0) ROOT c = {shape} copy(p) }}")
    emitter = LoopFusion(fusion, device)
    assert emitter.unroll_factor == unroll
    launch = emitter.launch_dimensions()
    assert (launch.threads_xyz(), launch.blocks_xyz()) == (threads, blocks)


def test_ops_that_prevent_unrolling() -> None:
    operands = ", ".join(f"p{i}" for i in range(11))
    params = "\n".join(f"p{i} = f32[32768] parameter({i})" for i in range(11))
    fusion = fusion_of(f"f {{ {params} ROOT c = f32[360448] concatenate({operands}), dimensions={{0}} }}")
    comp = fusion.fused_computation()
    assert loop_fusion_unroll_factor(360448, comp, [comp.root]) == 1
    fusion = fusion_of(f"f {{ {params} ROOT c = f32[32768] add(p0, p1) }}")
    comp = fusion.fused_computation()
    assert loop_fusion_unroll_factor(360448, comp, [comp.root]) == 4


def test_grid_split_uses_powers_of_two() -> None:
    assert split_grid_x(2 ** 31 - 1) == (2 ** 31 - 1, 1)
    assert split_grid_x(2 ** 31) == (2 ** 30, 2)
    assert split_grid_x(3 * 2 ** 31 + 5) == (1610612738, 4)
    assert loop_launch_dimensions(0, 1).blocks_xyz() == (1, 1, 1)


def test_split_grid_kernel_bounds_checks_extra_blocks() -> None:
    # A small grid limit forces the x*y split; blocks past the end must write nothing.
    from dataclasses import replace

    device = replace(H100, block_dim_limit=(3, 65535, 65535))
    fusion = fusion_of("f { p = f32[1000] parameter(0) ROOT n = f32[1000] negate(p) }")
    kernel = LoopFusion(fusion, device).emit()
    assert kernel.grid == (2, 4, 1)
    args = random_args(fusion)
    np.testing.assert_array_equal(run_on_host(fusion, args, kernel)[0], -args[0])


# -- multi-output, dedup, vectorization -----------------------------------------------------------------
def test_multi_output_with_bitcast_and_layouts() -> None:
    check_fusion("""f {
      p0 = f64[8] parameter(0)
      p1 = f64[8] parameter(1)
      mn = f64[8] minimum(p0, p1)
      mx = f64[8] maximum(p0, p1)
      bc = f64[2,4] bitcast(mx)
      tr = f64[2,4]{0,1} copy(bc)
      ROOT t = (f64[8], f64[2,4], f64[2,4]{0,1}) tuple(mn, bc, tr)
    }""")


def test_in_place_arguments_share_one_parameter() -> None:
    text = """f {
      p0 = f32[16,8] parameter(0)
      p1 = f32[4,8] parameter(1)
      i = s32[] parameter(2)
      z = s32[] constant(0)
      ROOT d = f32[16,8] dynamic-update-slice(p0, p1, i, z)
    }"""
    fusion = fusion_of(text)
    kernel = emit_kernel(fusion, argument_ids=["a", "b", "c", "a"])
    assert [(p.name, p.written) for p in kernel.params] == [("arg0", True), ("arg1", False), ("arg2", False)]
    args = random_args(fusion)
    args[2] = np.array(5, np.int32)
    got = run_on_host(fusion, args, kernel, argument_ids=["a", "b", "c", "a"])[0]
    np.testing.assert_array_equal(got, reference(fusion, args)[0])


def test_argument_ids_must_match_the_arguments() -> None:
    fusion = fusion_of("f { p = f32[4] parameter(0) ROOT n = f32[4] negate(p) }")
    with pytest.raises(EmitterError, match="2 kernel arguments"):
        emit_kernel(fusion, argument_ids=[0])
    fusion = fusion_of("f { p = f32[4] parameter(0) ROOT n = f32[8] broadcast(p), dimensions={} }") \
        if False else fusion_of("f { p = f32[4] parameter(0) ROOT n = s32[4] convert(p) }")
    with pytest.raises(EmitterError, match="different shapes"):
        emit_kernel(fusion, argument_ids=[0, 0])


@pytest.mark.parametrize("body,vectorized", [
    ("p = f32[512,1024] parameter(0)\n ROOT n = f32[512,1024] negate(p)", True),
    # a transpose XLA does not tile (minor dim 4): a loop fusion reading across rows
    ("p = f32[131072,4] parameter(0)\n t = f32[4,131072] transpose(p), dimensions={1,0}\n"
     " ROOT n = f32[4,131072] negate(t)", False),
])
def test_vectorization_needs_contiguous_indices(body: str, vectorized: bool) -> None:
    fusion = fusion_of(f"f {{ {body} }}")
    text = print_kernel(emit_kernel(fusion))
    first_load = text.split("load @arg0")[1].splitlines()[0]
    assert ("vector<4xf32>" in first_load) == vectorized
    assert "store @arg1 %vec" in text  # the output is always contiguous in the unroll index


def test_sub_byte_outputs_are_packed_per_thread() -> None:
    check_fusion("f { p = s8[37] parameter(0) ROOT c = s2[37]{0:E(2)} convert(p) }")
    check_fusion("f { p = s4[37]{0:E(4)} parameter(0) ROOT c = s8[37] convert(p) }")


# -- what the loop emitter does not do ----------------------------------------------------------------
def test_kinds_without_a_registered_emitter_are_named(monkeypatch) -> None:
    from hlo_codegen import emitters

    fusion = fusion_of("""add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
      f { p = f32[64,1024] parameter(0) z = f32[] constant(0)
          ROOT r = f32[64] reduce(p, z), dimensions={1}, to_apply=add }""")
    assert emitter_kind(fusion)[0] == "reduction"
    monkeypatch.delitem(emitters.EMITTERS, "reduction", raising=False)
    with pytest.raises(EmitterError, match="no emitter for reduction fusion %fusion \\(hero %r, reduce\\)"):
        emit_kernel(fusion)


def test_small_reduce_is_elemental() -> None:
    # (R, K, R) with a minor reduced size of 5: faster elementally (XLA's rule), so kLoop.
    fusion = fusion_of("""add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
      f { p = f32[3,4,5] parameter(0) z = f32[] constant(0)
          ROOT r = f32[4] reduce(p, z), dimensions={0,2}, to_apply=add }""")
    assert emitter_kind(fusion)[0] == "loop"
    check_fusion(fusion)


def test_ops_without_elemental_emission_are_named() -> None:
    fusion = fusion_of("""lt { a = f32[] parameter(0) b = f32[] parameter(1)
          ROOT c = pred[] compare(a, b), direction=LT }
        f { a = f32[8] parameter(0)
        s = f32[8] sort(a), dimensions={0}, to_apply=lt
        ROOT n = f32[8] negate(s) }""")
    with pytest.raises(EmitterError, match=r"cannot emit %s \(sort\) \(it needs a sort emitter\)"):
        emit_kernel(fusion)
    assert emitter_kind(fusion_of("""lt { a = f32[] parameter(0) b = f32[] parameter(1)
          ROOT c = pred[] compare(a, b), direction=LT }
        f { a = f32[8] parameter(0) ROOT s = f32[8] sort(a), dimensions={0}, to_apply=lt }"""))[0] == "sort"
    with pytest.raises(EmitterError, match="not a fusion"):
        emit_kernel(fusion.operands[0])


def test_64_bit_elements_vectorize_as_xla() -> None:
    # XLA vectorizes 4 lanes of any vector element type; 4 x 64 bits is split by LLVM into two
    # 16-byte accesses (our parameters are 16-byte aligned)
    kernel = check_fusion("f { p = f64[512,1024] parameter(0) q = s64[512,1024] parameter(1) "
                          "c = f64[512,1024] convert(q) ROOT n = f64[512,1024] add(p, c) }")
    text = print_kernel(kernel)
    assert "{align = 16} : vector<4xf64>" in text and ": vector<4xi64>" in text
    assert "store @arg2 %vec" in text


def test_pred_vectorizes_as_bytes() -> None:
    # pred is a byte in memory: 4 lanes load and store 4 bytes (XLA's vector<4xi8>), and the
    # numbers still match the reference
    kernel = check_fusion("f { p = pred[1024,1024] parameter(0) q = pred[1024,1024] parameter(1) "
                          "x = pred[1024,1024] xor(p, q) s = f32[1024,1024] parameter(2) "
                          "z = f32[1024,1024] select(x, s, s) ROOT t = (pred[1024,1024], f32[1024,1024]) "
                          "tuple(x, z) }")
    text = print_kernel(kernel)
    assert text.count("{align = 4} : vector<4xi1>") == 2 and "{align = 16} : vector<4xf32>" in text
    assert "store @arg3 %vec" in text
    # NVPTX: each 4-byte vector of pred is one 32-bit access, no byte loads or stores
    from hlo_codegen.llvm import lower_to_nvptx
    from hlo_codegen.ptx import compile_to_ptx

    ptx = compile_to_ptx(lower_to_nvptx(kernel), "sm_90")
    assert "ld.global.nc.b32" in ptx and "st.global.b32" in ptx
    assert ".u8" not in ptx and ".b8" not in ptx
