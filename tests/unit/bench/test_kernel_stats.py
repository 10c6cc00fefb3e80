"""Kernels launched and bytes moved (bench/kernel_stats.py) on small modules, every expected figure
counted by hand from the shapes in the text (f32 = 4 bytes, s32 = 4, bf16 = 2, pred = 1)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from hlo_common.hlo.parser import parse_module  # noqa: E402
from kernel_stats import kernel_stats  # noqa: E402


def _stats(text):
    return kernel_stats(parse_module(text))


def _by_name(stats):
    return {k.name: k for k in stats.kernels}


def test_unfused_softmax_launches_every_compute_op():
    stats = _stats("""
HloModule m
mx { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }
ad { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[8,16] parameter(0)
  ninf = f32[] constant(-inf)
  zero = f32[] constant(0)
  m = f32[8] reduce(x, ninf), dimensions={1}, to_apply=mx
  mb = f32[8,16] broadcast(m), dimensions={0}
  d = f32[8,16] subtract(x, mb)
  ex = f32[8,16] exponential(d)
  s = f32[8] reduce(ex, zero), dimensions={1}, to_apply=ad
  sb = f32[8,16] broadcast(s), dimensions={0}
  ROOT r = f32[8,16] divide(ex, sb)
}""")
    assert [k.name for k in stats.kernels] == ["m", "mb", "d", "ex", "s", "sb", "r"]
    k = _by_name(stats)
    # reduce: reads x (8*16*4 = 512) and its init value (4), writes 8*4 = 32
    assert (k["m"].bytes_read, k["m"].bytes_written) == (516, 32)
    assert (k["mb"].bytes_read, k["mb"].bytes_written) == (32, 512)
    assert (k["d"].bytes_read, k["d"].bytes_written) == (1024, 512)
    assert k["m"].kind == "reduction" and k["d"].kind == "loop" and k["d"].ops == (("subtract", 1),)
    assert stats.count == 7
    assert stats.bytes == (516 + 32) + (32 + 512) + (1024 + 512) + (512 + 512) + (516 + 32) \
        + (32 + 512) + (1024 + 512)
    assert stats.kinds == {"loop": 5, "reduction": 2}
    assert not stats.uses_triton


def test_a_lone_op_reads_a_repeated_operand_once():
    stats = _stats("ENTRY e { x = f32[10] parameter(0)  ROOT a = f32[10] add(x, x) }")
    assert (stats.kernels[0].bytes_read, stats.kernels[0].bytes_written) == (40, 40)


def test_fusions_count_operands_and_result_not_their_bodies():
    stats = _stats("""
HloModule m
ad { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
fr {
  p0 = f32[64,32] parameter(0)
  p1 = f32[32] parameter(1)
  b = f32[64,32] broadcast(p1), dimensions={1}
  m = f32[64,32] multiply(p0, b)
  c = f32[] constant(0)
  ROOT r = f32[64] reduce(m, c), dimensions={1}, to_apply=ad
}
fl {
  p0 = f32[64] parameter(0)
  e = f32[64] exponential(p0)
  ROOT t = (f32[64], f32[64]) tuple(e, p0)
}
ENTRY e {
  x = f32[64,32] parameter(0)
  y = f32[32] parameter(1)
  red = f32[64] fusion(x, y), kind=kInput, calls=fr
  mo = (f32[64], f32[64]) fusion(red), kind=kLoop, calls=fl
  g0 = f32[64] get-tuple-element(mo), index=0
  bc = f32[8,8] bitcast(g0)
  ROOT t = (f32[8,8], f32[64]) tuple(bc, red)
}""")
    k = _by_name(stats)
    assert list(k) == ["red", "mo"]
    assert (k["red"].bytes_read, k["red"].bytes_written, k["red"].kind) == \
        (64 * 32 * 4 + 32 * 4, 256, "reduction")
    assert k["red"].ops == (("broadcast", 1), ("multiply", 1), ("reduce", 1))
    # multi-output: the result tuple's two leaves are written
    assert (k["mo"].bytes_read, k["mo"].bytes_written, k["mo"].kind) == (256, 512, "loop")


def test_in_place_dynamic_update_slice_moves_only_its_update():
    stats = _stats("""
HloModule m
f {
  buf = f32[64,32] parameter(0)
  upd = f32[4,32] parameter(1)
  i = s32[] parameter(2)
  t = f32[4,32] tanh(upd)
  z = s32[] constant(0)
  ROOT d = f32[64,32] dynamic-update-slice(buf, t, i, z)
}
ENTRY e {
  b = f32[64,32] parameter(0)
  u = f32[4,32] parameter(1)
  i = s32[] parameter(2)
  ROOT f = f32[64,32] fusion(b, u, i), kind=kLoop, calls=f
}""")
    (k,) = stats.kernels
    # the update's 4*32*4 = 512 bytes read through `upd`, the index 4, and 512 written
    assert (k.bytes_read, k.bytes_written, k.kind) == (516, 512, "in_place_dus")


def test_lone_dynamic_update_slice_is_in_place_too():
    stats = _stats("""
ENTRY e {
  b = f32[64,32] parameter(0)
  u = f32[4,32] parameter(1)
  i = s32[] parameter(2)
  z = s32[] constant(0)
  ROOT d = f32[64,32] dynamic-update-slice(b, u, i, z)
}""")
    (k,) = stats.kernels
    assert (k.bytes_read, k.bytes_written) == (512 + 4 + 4, 512)


def test_a_parameter_only_sliced_counts_what_the_slices_read():
    stats = _stats("""
HloModule m
f {
  p = f32[100,10] parameter(0)
  a = f32[10,10] slice(p), slice={[0:10], [0:10]}
  pb = f32[1000] bitcast(p)
  b = f32[100] slice(pb), slice={[100:200]}
  bb = f32[10,10] bitcast(b)
  ROOT s = f32[10,10] add(a, bb)
}
g {
  p = f32[100,10] parameter(0)
  a = f32[10,10] slice(p), slice={[0:10], [0:10]}
  e = f32[100,10] exponential(p)
  b = f32[10,10] slice(e), slice={[0:10], [0:10]}
  ROOT s = f32[10,10] add(a, b)
}
ENTRY e {
  x = f32[100,10] parameter(0)
  f = f32[10,10] fusion(x), kind=kLoop, calls=f
  g = f32[10,10] fusion(x), kind=kLoop, calls=g
  ls = f32[5,10] slice(x), slice={[0:5], [0:10]}
  ROOT t = (f32[10,10], f32[10,10], f32[5,10]) tuple(f, g, ls)
}""")
    k = _by_name(stats)
    assert (k["f"].bytes_read, k["f"].bytes_written) == (800, 400)
    assert (k["g"].bytes_read, k["g"].bytes_written) == (4000, 400)  # exp reads all of p
    assert (k["ls"].bytes_read, k["ls"].bytes_written) == (200, 200)


def test_gather_operand_counts_the_gathered_rows():
    stats = _stats("""
HloModule m
f {
  t = f32[1000,8] parameter(0)
  i = s32[5,1] parameter(1)
  ROOT g = f32[5,8] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
    index_vector_dim=1, slice_sizes={1,8}
}
ENTRY e {
  t = f32[1000,8] parameter(0)
  i = s32[5,1] parameter(1)
  ROOT g = f32[5,8] fusion(t, i), kind=kLoop, calls=f
}""")
    (k,) = stats.kernels
    assert (k.bytes_read, k.bytes_written) == (160 + 20, 160)


def test_scatter_updates_its_operand_in_place():
    stats = _stats("""
HloModule m
ad { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
f {
  o = f32[1000,8] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,8] parameter(2)
  ROOT s = f32[1000,8] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=ad
}
ENTRY e {
  o = f32[1000,8] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,8] parameter(2)
  ROOT s = f32[1000,8] fusion(o, i, u), kind=kInput, calls=f
}""")
    (k,) = stats.kernels
    # reads 160 bytes of the operand (where the updates go), indices 20, updates 160; writes 160
    assert (k.bytes_read, k.bytes_written, k.kind) == (160 + 20 + 160, 160, "scatter")


def test_cublas_call_is_a_library_call_without_its_workspace():
    stats = _stats("""
ENTRY e {
  a = f32[16,8] parameter(0)
  b = f32[8,32] parameter(1)
  c = f32[32] parameter(2)
  g = (f32[16,32], s8[4194304]) custom-call(a, b), custom_call_target="__cublas$gemm"
  r = f32[16,32] get-tuple-element(g), index=0
  h = (f32[16,32], s8[1024]) custom-call(a, b, c), custom_call_target="__cublas$lt$matmul",
    backend_config={"gemm_backend_config":{"epilogue":"BIAS"}}
  ROOT t = (f32[16,32], (f32[16,32], s8[1024])) tuple(r, h)
}""")
    g, h = stats.kernels
    assert (g.bytes_read, g.bytes_written, g.kind, g.target) == (512 + 1024, 2048, "library", "__cublas$gemm")
    assert (h.bytes_read, h.bytes_written, h.target) == (512 + 1024 + 128, 2048, "__cublas$lt$matmul:BIAS")


def test_triton_and_cudnn_fusions_are_told_apart():
    stats = _stats("""
HloModule m
f { p = f32[4,4] parameter(0)  ROOT e = f32[4,4] exponential(p) }
ENTRY e {
  x = f32[4,4] parameter(0)
  t = f32[4,4] fusion(x), kind=kCustom, calls=f,
    backend_config={"fusion_backend_config":{"kind":"__triton"}}
  g = f32[4,4] fusion(t), kind=kCustom, calls=f,
    backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  c = f32[4,4] fusion(g), kind=kCustom, calls=f,
    backend_config={"fusion_backend_config":{"kind":"__cudnn$fusion"}}
  ROOT l = f32[4,4] fusion(c), kind=kLoop, calls=f
}""")
    assert [k.kind for k in stats.kernels] == ["triton", "triton", "cudnn", "loop"]
    assert [k.target for k in stats.kernels] == ["__triton", "__triton_gemm", "__cudnn$fusion", ""]
    assert stats.uses_triton and stats.uses_cudnn


def test_loop_bodies_and_branches_count_once_and_bookkeeping_not_at_all():
    stats = _stats("""
HloModule m
cond {
  s = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[256] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  v1 = f32[256] sine(v)
  ROOT t = (s32[], f32[256]) tuple(i1, v1)
}
yes { p = f32[256] parameter(0)  ROOT e = f32[256] exponential(p) }
no { p = f32[256] parameter(0)  ROOT e = f32[256] log(p) }
ENTRY e {
  x = f32[256] parameter(0)
  c = f32[256] copy(x)
  z = s32[] constant(0)
  t = (s32[], f32[256]) tuple(z, c)
  w = (s32[], f32[256]) while(t), condition=cond, body=body
  v = f32[256] get-tuple-element(w), index=1
  p = pred[] parameter(1)
  ROOT r = f32[256] conditional(p, v, v), true_computation=yes, false_computation=no
}""")
    assert [(k.computation, k.name) for k in stats.kernels] == [
        ("e", "c"), ("cond", "lt"), ("body", "i1"), ("body", "v1"), ("yes", "e"), ("no", "e")]
    k = stats.kernels
    assert (k[0].kind, k[0].bytes) == ("copy", 2048)
    assert (k[1].bytes_read, k[1].bytes_written) == (8, 1)
    assert stats.count == 6


def test_a_sort_fusion_without_backend_kind_is_a_sort():
    stats = _stats("""
HloModule m
lt { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT l = pred[] compare(a, b), direction=LT }
f { p = f32[64] parameter(0)  ROOT s = f32[64] sort(p), dimensions={0}, to_apply=lt }
ENTRY e {
  x = f32[64] parameter(0)
  ROOT s = f32[64] fusion(x), kind=kCustom, calls=f
}""")
    assert [(k.kind, k.bytes) for k in stats.kernels] == [("sort", 512)]


def test_lone_ops_get_their_kinds():
    stats = _stats("""
ENTRY e {
  x = f32[32,16] parameter(0)
  t = f32[16,32] transpose(x), dimensions={1,0}
  d = f32[16,16] dot(t, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT c = f32[32,16] concatenate(d, d), dimensions={0}
}""")
    assert [k.kind for k in stats.kernels] == ["transpose", "library", "concatenate"]


# -- the bench's "what differs" notes (bench/fusion_vs_xla.py), on kernels made by hand -----------
def _bench():
    import importlib.util
    import sys
    from pathlib import Path

    if "fusion_vs_xla" not in sys.modules:  # its dataclasses need the module registered
        path = Path(__file__).resolve().parents[3] / "bench" / "fusion_vs_xla.py"
        spec = importlib.util.spec_from_file_location("fusion_vs_xla", path)
        sys.modules["fusion_vs_xla"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["fusion_vs_xla"])
    return sys.modules["fusion_vs_xla"]


def _k(name, kind, nbytes, *ops, target=""):
    from kernel_stats import Kernel

    counts = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return Kernel(name, "main", "fusion", kind, nbytes, 0, tuple(sorted(counts.items())), target)


def test_bench_notes_name_the_xla_fusion_we_split_and_our_extra_launches():
    from kernel_stats import KernelStats

    xla = KernelStats((_k("input_reduce_fusion", "reduction", 100, "reduce", "exponential", "subtract"),
                       _k("gemm", "library", 50, "custom-call", target="__cublas$lt$matmul:BIAS")))
    ours = KernelStats((_k("sub", "loop", 100, "subtract"), _k("exp", "loop", 100, "exponential"),
                        _k("red", "reduction", 100, "reduce"), _k("dot", "library", 50, "dot"),
                        _k("bias", "loop", 100, "add")))
    notes = _bench().differences(ours, xla)
    assert notes == [
        "XLA fuses exponential+reduce+subtract into 1 reduction kernel (input_reduce_fusion); "
        "we launch 3: subtract, exponential, reduce",
        "we launch 1 more with no XLA counterpart: loop add",
        "XLA's gemm does the BIAS epilogue in cuBLAS; our dot does not",
    ]


def test_bench_notes_are_empty_for_the_same_kernels_and_name_a_heavier_twin():
    from kernel_stats import KernelStats

    xla = KernelStats((_k("a", "loop", 10**6, "add"), _k("b", "loop", 10**6, "add", "exponential")))
    assert _bench().differences(xla, xla) == []
    heavy = KernelStats((_k("a", "loop", 10**6, "add"), _k("f", "loop", 1.5e6, "add", "exponential")))
    assert _bench().differences(heavy, xla) == [
        "our f and XLA's b (add+exponential) move 1.5 vs 1.0 MB"]
