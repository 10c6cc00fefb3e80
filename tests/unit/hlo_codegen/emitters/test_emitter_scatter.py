"""The scatter emitter: one thread per update element with atomics where indices may repeat
(native atomicrmw or a compare-and-swap loop), plain stores for unique indices, out-of-bounds
windows skipped, in place when the output aliases the operand, XLA's launch dimensions, and
XLA's scatter emitter tests - on the host against the interpreter, PTX linked for sm_90 with
`atom.global` instructions."""

from __future__ import annotations


import numpy as np
import pytest

from corpus_lib import CORPUS_DIR as CORPUS
from emitter_testlib import check, fusion_of, index_aware_args, reference, run_on_host
from hlo_codegen.emitters import emit_kernel
from hlo_codegen.emitters.scatter import combiner_kind
from hlo_codegen.kernel_ir.printer import print_kernel
from hlo_codegen.llvm import lower_to_nvptx
from hlo_codegen.ptx import compile_to_ptx


SCATTER_ROWS = """{comb}
f {{ op = {t}[10,5] parameter(0) idx = s32[{n},1] parameter(1) upd = {t}[{n},2,3] parameter(2)
  ROOT s = {t}[10,5] scatter(op, idx, upd), update_window_dims={{1,2}}, inserted_window_dims={{}},
    scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, unique_indices={unique}, to_apply=c }}"""
ADD = "c { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }"
# Not commutative: the order in which duplicates are combined shows in the result.
ORDERED = ("c { a = s32[] parameter(0) b = s32[] parameter(1) two = s32[] constant(3)"
           " m = s32[] multiply(a, two)"
           " ROOT s = s32[] add(m, b) }")


def _atomics(kernel) -> list:
    return [op for op in kernel.body.walk() if op.name == "atomic_rmw"]


def test_duplicates_with_a_non_native_combiner_go_through_a_cas_loop() -> None:
    # 3a + b is not commutative: the interpreter's order shows in the result, a GPU's would not;
    # multiply (wrapping s32) is exact in any order, so the atomic result must equal it.
    mul = "c { a = s32[] parameter(0) b = s32[] parameter(1) ROOT m = s32[] multiply(a, b) }"
    fusion = fusion_of(SCATTER_ROWS.format(comb=mul, t="s32", n=6, unique="false"))
    op = np.arange(1, 51, dtype=np.int32).reshape(10, 5)
    idx = np.array([[2], [2], [7], [2], [-1], [8]], np.int32)  # -1 and 8 (window of 2 rows) are out of bounds
    upd = (np.arange(36, dtype=np.int32) * 7919 + 3).reshape(6, 2, 3)
    want = op.astype(np.int64)
    for i, start in enumerate(idx[:, 0]):
        if 0 <= start <= 8:
            want[start:start + 2, 0:3] = (want[start:start + 2, 0:3] * upd[i]) & 0xFFFFFFFF
    want = want.astype(np.uint32).view(np.int32)
    ids = [0, 1, 2, 0]
    kernel = emit_kernel(fusion, argument_ids=ids)
    (rmw,) = _atomics(kernel)
    assert "kind" not in rmw.attrs  # no native multiply: compare-and-swap around the combiner
    (got,) = run_on_host(fusion, [op.copy(), idx, upd], kernel, argument_ids=ids)
    np.testing.assert_array_equal(got, want)
    check(fusion, "scatter", args=[op, idx, upd], argument_ids=ids)


def test_in_place_when_the_output_aliases_the_operand() -> None:
    fusion = fusion_of(SCATTER_ROWS.format(comb=ADD, t="f32", n=24, unique="false"))
    args = index_aware_args(fusion, seed=3)
    aliased = emit_kernel(fusion, argument_ids=[0, 1, 2, 0])
    # XLA's launch for 144 update elements: 2 blocks of 128 threads, one element each
    assert len(aliased.params) == 3 and aliased.grid == (2, 1, 1) and aliased.block == (128, 1, 1)
    assert [op.attrs.get("kind") for op in _atomics(aliased)] == ["addf"]
    assert "sync_threads" not in print_kernel(aliased)
    ptx = compile_to_ptx(lower_to_nvptx(aliased, use_libdevice=False), "sm_90")
    assert "atom.global.add.f32" in ptx or "red.global.add.f32" in ptx
    copied = emit_kernel(fusion)
    assert copied.block[0] > 1 and copied.grid == (1, 1, 1)  # init by a block, a barrier, then updates
    assert "sync_threads" in print_kernel(copied) and _atomics(copied)
    check(fusion, "scatter", args=args, argument_ids=[0, 1, 2, 0])
    check(fusion, "scatter", args=args)


def test_integer_atomics_are_exact_with_many_duplicates() -> None:
    # every update lands on one of three rows: heavy contention, blocks run on several host threads
    for comb, kind in (("add", "addi"), ("maximum", "maxsi"), ("minimum", "minsi"), ("xor", "xori")):
        text = (f"c {{ a = s32[] parameter(0) b = s32[] parameter(1) ROOT r = s32[] {comb}(a, b) }}\n"
                "f { op = s32[3,64] parameter(0) idx = s32[4096,1] parameter(1)"
                "  u = s32[4096,1,64] parameter(2)"
                "  ROOT s = s32[3,64] scatter(op, idx, u), update_window_dims={1,2}, inserted_window_dims={},"
                "  scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=c }")
        fusion = fusion_of(text)
        rng = np.random.default_rng(5)
        args = [rng.integers(-1000, 1000, (3, 64)).astype(np.int32),
                rng.integers(-1, 4, (4096, 1)).astype(np.int32),  # -1 and 3 are out of bounds
                rng.integers(-1 << 20, 1 << 20, (4096, 1, 64)).astype(np.int32)]
        kernel = check(fusion, "scatter", args=args, argument_ids=[0, 1, 2, 0])
        assert [op.attrs["kind"] for op in _atomics(kernel)] == [kind]
        assert kernel.num_blocks > 1


def test_float_add_with_duplicates_is_within_the_float_bounds() -> None:
    fusion = fusion_of(SCATTER_ROWS.format(comb=ADD, t="f32", n=2000, unique="false"))
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((10, 5)).astype(np.float32), rng.integers(0, 9, (2000, 1)).astype(np.int32),
            rng.standard_normal((2000, 2, 3)).astype(np.float32)]
    check(fusion, "scatter", args=args, argument_ids=[0, 1, 2, 0])
    check(fusion, "scatter", args=args)


SORTED = """c {{ a = {t}[] parameter(0) b = {t}[] parameter(1) ROOT r = {t}[] {comb}(a, b) }}
f {{ op = {t}[100,3] parameter(0) idx = s32[{n},1] parameter(1) u = {t}[{n},{w},3] parameter(2)
  ROOT s = {t}[100,3] scatter(op, idx, u), update_window_dims={{1,2}}, inserted_window_dims={{}},
    scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, indices_are_sorted=true, to_apply=c }}"""


@pytest.mark.parametrize("t,comb,n,w", [("f32", "add", 2008, 2), ("s32", "multiply", 3000, 5),
                                        ("s32", "maximum", 700, 40)])
def test_sorted_indices_accumulate_per_warp(t: str, comb: str, n: int, w: int) -> None:
    """XLA's distributed-indices variant: 4 warps of 128 threads per block, K slices per warp,
    runs of equal indices combined in registers, one atomic per element at each index change."""
    fusion = fusion_of(SORTED.format(t=t, comb=comb, n=n, w=w))
    rng = np.random.default_rng(n)
    # sorted, long runs of equal starts, out-of-bounds starts at both ends
    idx = np.sort(rng.integers(-3, 103 - w, (n, 1)), axis=0).astype(np.int32)
    if t == "f32":
        upd = rng.standard_normal((n, w, 3)).astype(np.float32)
    else:
        upd = rng.integers(-5, 6, (n, w, 3)).astype(np.int32) | 1
    op = rng.integers(1, 4, (100, 3)).astype(np.float32 if t == "f32" else np.int32)
    kernel = emit_kernel(fusion, argument_ids=[0, 1, 2, 0])
    per_warp = -(-n // max(4 * 132, 100 - w + 1))
    per_warp = -(-per_warp // 4) * 4 if per_warp > 4 else per_warp
    assert kernel.block == (128, 1, 1) and kernel.grid == (-(-n // (4 * per_warp)), 1, 1)
    assert "index_id" in print_kernel(kernel)  # the loop over a warp's slices
    check(fusion, "scatter", args=[op, idx, upd], argument_ids=[0, 1, 2, 0])


def test_few_sorted_slices_take_the_distributed_updates_variant() -> None:
    fusion = fusion_of(SORTED.format(t="f32", comb="add", n=500, w=2))  # 500 <= 4 warps x 132 SMs
    kernel = emit_kernel(fusion, argument_ids=[0, 1, 2, 0])
    assert kernel.grid == (24, 1, 1) and kernel.block == (128, 1, 1)  # 3000 elements, one per thread
    assert "index_id" not in print_kernel(kernel)


def test_combiner_kinds() -> None:
    def kind(body: str, t: str) -> str | None:
        params = f"a = {t}[] parameter(0)" + ("" if "parameter(1)" in body else f" b = {t}[] parameter(1)")
        text = (f"c {{ {params} {body} }}\n"
                f"f {{ op = {t}[8] parameter(0) idx = s32[2,1] parameter(1) u = {t}[2] parameter(2)"
                f"  ROOT s = {t}[8] scatter(op, idx, u), update_window_dims={{}}, inserted_window_dims={{0}},"
                "  scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=c }")
        return combiner_kind(fusion_of(text).fused_computation().root)

    assert kind("ROOT r = f32[] add(a, b)", "f32") == "addf"
    assert kind("ROOT r = bf16[] add(b, a)", "bf16") == "addf"
    assert kind("ROOT r = s8[] add(a, b)", "s8") == "addi"
    assert kind("ROOT r = u32[] maximum(a, b)", "u32") == "maxui"
    assert kind("ROOT r = s64[] minimum(a, b)", "s64") == "minsi"
    assert kind("ROOT r = pred[] or(a, b)", "pred") == "ori"
    assert kind("ROOT b = f32[] parameter(1)", "f32") == "assign"
    assert kind("ROOT r = f32[] maximum(a, b)", "f32") is None  # NaN rules: compare-and-swap
    assert kind("ROOT r = f32[] multiply(a, b)", "f32") is None
    assert kind("ROOT r = f32[] subtract(a, b)", "f32") is None
    assert kind("ROOT r = f32[] add(a, a)", "f32") is None


def _rows_scatter(t: str, comb: str):
    text = (f"c {{ a = {t}[] parameter(0) b = {t}[] parameter(1) ROOT r = {t}[] {comb}(a, b) }}\n"
            f"f {{ op = {t}[5,7] parameter(0) idx = s32[40,1] parameter(1) u = {t}[40,2,7] parameter(2)"
            f"  ROOT s = {t}[5,7] scatter(op, idx, u), update_window_dims={{1,2}},"
            "  inserted_window_dims={},"
            "  scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=c }")
    fusion = fusion_of(text)
    args = index_aware_args(fusion, seed=4)
    args[1] = np.random.default_rng(1).integers(-1, 5, (40, 1)).astype(np.int32)  # -1 and 4: out of bounds
    return fusion, args


def test_other_element_types_against_the_interpreter() -> None:
    for t, comb in (("f64", "add"), ("s8", "add"), ("u16", "maximum"), ("f32", "maximum"),
                    ("f32", "multiply"), ("pred", "or"), ("s64", "minimum")):
        fusion, args = _rows_scatter(t, comb)
        kernel = check(fusion, "scatter", args=args, argument_ids=[0, 1, 2, 0])
        assert len(_atomics(kernel)) == 1, t


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_16_bit_float_add_within_the_rounding_bound_of_any_order(t: str) -> None:
    """About 16 duplicates per element, each add rounded to 16 bits: the interpreter's order and
    the threads' order both land within (adds + 1) * eps * (|operand| + sum |updates|) of the exact
    sum (the bound of recursive summation in any order), which can exceed the 2e-2 of testing.md."""
    fusion, args = _rows_scatter(t, "add")
    ids = [0, 1, 2, 0]
    kernel = emit_kernel(fusion, argument_ids=ids)
    (got,) = run_on_host(fusion, [a.copy() for a in args], kernel, argument_ids=ids)
    (want,) = reference(fusion, args)
    op, idx, upd = (a.astype(np.float64) if a.dtype != np.int32 else a for a in args)
    exact, magnitude, adds = op.copy(), np.abs(op), np.zeros(op.shape)
    for i, start in enumerate(idx[:, 0]):
        if 0 <= start <= 3:
            exact[start:start + 2] += upd[i]
            magnitude[start:start + 2] += np.abs(upd[i])
            adds[start:start + 2] += 1
    assert adds.max() >= 10
    bound = (adds + 1) * 2.0 ** -(11 if t == "f16" else 8) * magnitude  # unit roundoff of the type
    for name, result in (("ours", got), ("interpreter", want)):
        err = np.abs(result.astype(np.float64) - exact)
        assert (err <= bound).all(), (name, err.max(), bound[err > bound])
    # small integers add exactly in any order: then the result is the interpreter's, bit for bit
    rng = np.random.default_rng(9)
    args = [rng.integers(-8, 9, a.shape).astype(a.dtype) if a.dtype != np.int32 else a for a in args]
    (got,) = run_on_host(fusion, [a.copy() for a in args], kernel, argument_ids=ids)
    np.testing.assert_array_equal(got.astype(np.float64), reference(fusion, args)[0].astype(np.float64))


def test_unique_indices_run_one_update_per_thread() -> None:
    fusion = fusion_of(SCATTER_ROWS.format(comb=ADD, t="f32", n=4, unique="true"))
    args = index_aware_args(fusion)
    args[1] = np.array([[0], [4], [8], [2]], np.int32)
    kernel = emit_kernel(fusion, argument_ids=[0, 1, 2, 0])
    assert kernel.block == (32, 1, 1)  # 24 update elements, one each, in one whole warp (XLA)
    check(fusion, args=args, argument_ids=[0, 1, 2, 0])
    check(fusion, args=args)


def test_fused_operand_updates_and_indices() -> None:
    check("""add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
      f { z = f32[] constant(0) op = f32[7,9] broadcast(z), dimensions={}
          raw = s32[11,2] parameter(0) one = s32[] constant(1) ones = s32[11,2] broadcast(one), dimensions={}
          idx = s32[11,2] add(raw, ones)
          u = f32[11] parameter(1) e = f32[11] exponential(u)
          ROOT s = f32[7,9] scatter(op, idx, e), update_window_dims={}, inserted_window_dims={0,1},
            scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add }""", "scatter")


def test_index_vector_dim_first_and_batching_dims() -> None:
    check("""add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
      f { op = f32[3,8,6] parameter(0) idx = s32[1,3,4] parameter(1) u = f32[3,4,2] parameter(2)
          ROOT s = f32[3,8,6] scatter(op, idx, u), update_window_dims={2}, inserted_window_dims={1},
            input_batching_dims={0}, scatter_indices_batching_dims={1},
            scatter_dims_to_operand_dims={1}, index_vector_dim=0, to_apply=add }""", "scatter")


def test_variadic_scatter_and_overwrite() -> None:
    check("""c { a = f32[] parameter(0) b = s32[] parameter(1) x = f32[] parameter(2) y = s32[] parameter(3)
            ROOT t = (f32[], s32[]) tuple(x, y) }
      f { o1 = f32[20] parameter(0) o2 = s32[20] parameter(1) idx = s32[30] parameter(2)
          v1 = f32[30] parameter(3) v2 = s32[30] parameter(4)
          ROOT s = (f32[20], s32[20]) scatter(o1, o2, idx, v1, v2), update_window_dims={},
            inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=c }""",
          "scatter")


def test_packed_s4_output_is_never_shared_between_threads() -> None:
    kernel = check("""add { a = s4[] parameter(0) b = s4[] parameter(1) ROOT s = s4[] add(a, b) }
      f { op = s4[33]{0:E(4)} parameter(0) idx = s32[10,1] parameter(1) u = s4[10]{0:E(4)} parameter(2)
          ROOT s = s4[33]{0:E(4)} scatter(op, idx, u), update_window_dims={}, inserted_window_dims={0},
            scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=add }""",
                   "scatter")
    # unique indices, but neighbours share bytes: a compare-and-swap on the byte
    assert len(_atomics(kernel)) == 1


def test_operand_read_elsewhere_cannot_be_in_place() -> None:
    from hlo_codegen.emitters import EmitterError

    fusion = fusion_of("""add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
      f { op = f32[8] parameter(0) idx = s32[2,1] parameter(1) sl = f32[2] slice(op), slice={[0:2]}
          ROOT s = f32[8] scatter(op, idx, sl), update_window_dims={}, inserted_window_dims={0},
            scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add }""")
    with pytest.raises(EmitterError, match="also read elsewhere"):
        emit_kernel(fusion, argument_ids=[0, 1, 0])
    check(fusion)


SCATTER_FILES = sorted(p.name for p in CORPUS.glob("backends_gpu_codegen_emitters_tests_scatter__*.hlo"))


@pytest.mark.parametrize("name", SCATTER_FILES)
def test_xla_scatter_emitter_files(name: str) -> None:
    fusion = fusion_of((CORPUS / name).read_text())
    args = index_aware_args(fusion)
    n = len(fusion.operands)
    check(fusion, "scatter", args=args, ptx=False)
    root = fusion.fused_computation().root
    k = (len(root.operands) - 1) // 2
    if all(op.opcode == "parameter" for op in root.operands[:k]):  # and in place
        ids = list(range(n)) + [root.operands[j].parameter_number for j in range(k)]
        check(fusion, args=args, argument_ids=ids, ptx=False)
