"""The normalization emitter (softmax / log-softmax / layernorm / RMSNorm in one kernel) on the
fusions hlo-opt's `normalization-fusion` pass forms: each kernel runs on the host backend against
the interpreter (bounds of testing.md through `check`), its PTX links for sm_90, and its kernel IR
has the structure the emitter promises (one shuffle_reduce, one shared array and one barrier per
reduction; each output element stored once; launch dimensions as fusion_analysis predicts).

Row lengths cover every launch shape: rows shorter than a warp (lanes masked), one warp per row
with 4 rows per block and a row count that is no multiple of 4 (rows masked), several warps per
row with a ragged last slot, and the longest rows fused (8192 elements, 1024 threads x 8). The
fusions that recompute a layernorm's statistics in its backward pass (up to five reductions in
sequence, later ones reading values of earlier ones) run the same way.
"""

from __future__ import annotations

import re

import pytest

from emitter_testlib import check
from hlo_codegen.emitters import emitter_kind
from hlo_codegen.kernel_ir import print_kernel
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.gpu.launch_dimensions import normalization_launch
from hlo_common.hlo.parser import parse_module
from hlo_opt.passes.normalization_fusion import NormalizationFusion

MAX = "mx { a = {t}[] parameter(0) b = {t}[] parameter(1) ROOT m = {t}[] maximum(a, b) }\n"
ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"


def softmax(dims: str, t: str = "f32", log: bool = False) -> str:
    """Softmax over the last dim of `dims` as JAX emits it after hlo-opt's earlier passes; bf16 as
    float normalization leaves it (max in bf16, the sum and the divide in f32)."""
    rows = dims.rsplit(",", 1)[0]
    kept = ",".join(str(i) for i in range(rows.count(",") + 1))
    last = rows.count(",") + 1
    full, row = f"[{dims}]", f"[{rows}]"
    if t == "f32":
        tail = (f"e = f32{full} exponential(s) "
                f"su = f32{row} reduce(e, z), dimensions={{{last}}}, to_apply=add ")
        if log:
            tail += (f"l = f32{row} log(su) bl = f32{full} broadcast(l), dimensions={{{kept}}} "
                     f"ROOT o = f32{full} subtract(s, bl)")
        else:
            tail += f"bs = f32{full} broadcast(su), dimensions={{{kept}}} ROOT o = f32{full} divide(e, bs)"
    else:
        tail = (f"e16 = bf16{full} exponential(s) e = f32{full} convert(e16) "
                f"su = f32{row} reduce(e, z), dimensions={{{last}}}, to_apply=add "
                f"bs = f32{full} broadcast(su), dimensions={{{kept}}} d = f32{full} divide(e, bs) "
                f"ROOT o = bf16{full} convert(d)")
    return (MAX.replace("{t}", t) + ADD + f"ENTRY e {{ x = {t}{full} parameter(0) "
            f"ni = {t}[] constant(-inf) z = f32[] constant(0) "
            f"m = {t}{row} reduce(x, ni), dimensions={{{last}}}, to_apply=mx "
            f"bm = {t}{full} broadcast(m), dimensions={{{kept}}} s = {t}{full} subtract(x, bm) "
            + tail + " }")


def layernorm(dims: str) -> str:
    rows, n = dims.rsplit(",", 1)
    kept = ",".join(str(i) for i in range(rows.count(",") + 1))
    last = len(kept.split(","))
    return ADD + f"""ENTRY e {{ x = f32[{dims}] parameter(0) g = f32[{n}] parameter(1)
      b = f32[{n}] parameter(2) z = f32[] constant(0) inv = f32[] constant({1.0 / int(n)})
      binv = f32[{rows}] broadcast(inv), dimensions={{}}
      sa = f32[{rows}] reduce(x, z), dimensions={{{last}}}, to_apply=add mean = f32[{rows}] multiply(sa, binv)
      bm = f32[{dims}] broadcast(mean), dimensions={{{kept}}} c = f32[{dims}] subtract(x, bm)
      sq = f32[{dims}] multiply(c, c) sb = f32[{rows}] reduce(sq, z), dimensions={{{last}}}, to_apply=add
      var = f32[{rows}] multiply(sb, binv) eps = f32[] constant(1e-5) beps = f32[{rows}] broadcast(eps),
      dimensions={{}} ve = f32[{rows}] add(var, beps) r = f32[{rows}] rsqrt(ve)
      br = f32[{dims}] broadcast(r), dimensions={{{kept}}} y = f32[{dims}] multiply(c, br)
      bg = f32[{dims}] broadcast(g), dimensions={{{last}}} yg = f32[{dims}] multiply(y, bg)
      bb = f32[{dims}] broadcast(b), dimensions={{{last}}} ROOT o = f32[{dims}] add(yg, bb) }}"""


def rmsnorm_bf16(dims: str) -> str:
    rows, n = dims.split(",")
    return ADD + f"""ENTRY e {{ x = bf16[{dims}] parameter(0) g = bf16[{n}] parameter(1)
      xf = f32[{dims}] convert(x) sq = f32[{dims}] multiply(xf, xf) z = f32[] constant(0)
      s = f32[{rows}] reduce(sq, z), dimensions={{1}}, to_apply=add inv = f32[] constant({1.0 / int(n)})
      binv = f32[{rows}] broadcast(inv), dimensions={{}} ms = f32[{rows}] multiply(s, binv)
      eps = f32[] constant(1e-6) beps = f32[{rows}] broadcast(eps), dimensions={{}}
      a = f32[{rows}] add(ms, beps) r = f32[{rows}] rsqrt(a) br = f32[{dims}] broadcast(r), dimensions={{0}}
      y = f32[{dims}] multiply(xf, br) yb = bf16[{dims}] convert(y)
      bg = bf16[{dims}] broadcast(g), dimensions={{1}} ROOT o = bf16[{dims}] multiply(yb, bg) }}"""


CAUSAL = MAX.replace("{t}", "f32") + ADD + """ENTRY e { x = f32[3,40,40] parameter(0)
  i0 = s32[40,40] iota(), iota_dimension=0 i1 = s32[40,40] iota(), iota_dimension=1
  ge = pred[40,40] compare(i0, i1), direction=GE bge = pred[3,40,40] broadcast(ge), dimensions={1,2}
  big = f32[] constant(-1e9) bbig = f32[3,40,40] broadcast(big), dimensions={}
  xm = f32[3,40,40] select(bge, x, bbig) ni = f32[] constant(-inf)
  m = f32[3,40] reduce(xm, ni), dimensions={2}, to_apply=mx bm = f32[3,40,40] broadcast(m), dimensions={0,1}
  s = f32[3,40,40] subtract(xm, bm) ex = f32[3,40,40] exponential(s) z = f32[] constant(0)
  su = f32[3,40] reduce(ex, z), dimensions={2}, to_apply=add bs = f32[3,40,40] broadcast(su), dimensions={0,1}
  ROOT d = f32[3,40,40] divide(ex, bs) }"""

# one row: rank-1 input, scalar reductions broadcast back with dimensions={}
ONE_ROW = MAX.replace("{t}", "f32") + ADD + """ENTRY e { x = f32[3000] parameter(0) ni = f32[] constant(-inf)
  m = f32[] reduce(x, ni), dimensions={0}, to_apply=mx bm = f32[3000] broadcast(m), dimensions={}
  s = f32[3000] subtract(x, bm) ex = f32[3000] exponential(s) z = f32[] constant(0)
  su = f32[] reduce(ex, z), dimensions={0}, to_apply=add bs = f32[3000] broadcast(su), dimensions={}
  ROOT d = f32[3000] divide(ex, bs) }"""

CASES = {
    "softmax_one_row": ONE_ROW,
    "causal_softmax_mask_from_iotas": CAUSAL,
    "softmax_rows_shorter_than_a_warp": softmax("6,5"),
    "softmax_warp_per_row_ragged_rows": softmax("10,100"),
    "softmax_several_warps_ragged_slot": softmax("7,1000"),
    "softmax_bf16": softmax("9,700", "bf16"),
    "log_softmax_longest_row": softmax("2,8192", log=True),
    "layernorm_3d": layernorm("3,5,300"),
    "layernorm_one_warp_rows": layernorm("13,64"),
    "rmsnorm_bf16": rmsnorm_bf16("6,2048"),
}


def normalization_fusion(text: str):
    module = parse_module(text)
    assert NormalizationFusion().run(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 1, [i.name for i in fusions]
    return fusions[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_normalization_kernel_matches_the_interpreter(name: str) -> None:
    text = CASES[name]
    fusion = normalization_fusion(text)
    assert emitter_kind(fusion)[0] == "normalization"
    _check_structure(fusion, check(fusion, "normalization"))


def _check_structure(fusion, kernel) -> None:
    ir = print_kernel(kernel)
    reduces = [i for i in fusion.fused_computation().instructions if i.opcode == "reduce"]
    assert ir.count("shuffle_reduce @") == len(reduces)
    assert ir.count("sync_threads") == len(reduces)
    assert len([b for b in kernel.buffers if b.kind == "shared"]) == len(reduces)
    # each output element is stored once: one store per row slot of a thread, none in a loop
    dims = tuple(reduces[0].operands[0].shape.dims)
    threads, per_block, blocks = normalization_launch(dims)
    slots = -(-dims[-1] // threads)
    assert ir.count("store @arg") == slots
    assert " loop " not in ir and "loop #" not in ir
    assert tuple(kernel.block) == (threads, per_block, 1) and tuple(kernel.grid) == (blocks, 1, 1)
    assert FusionAnalysis.of_fusion(fusion).launch_dimensions() == (blocks, threads * per_block)


def test_recomputing_fusions_of_a_layernorm_backward() -> None:
    # what the pass forms for testdata/fusion/layernorm_grad.hlo (at [48,320]: a ragged last slot):
    # mean and variance of x recomputed in each fusion; the input gradient's three more reductions
    # read values computed from the first two, and a row op combines two of them
    from pathlib import Path

    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    text = (Path(__file__).resolve().parents[4] / "testdata" / "fusion" / "layernorm_grad.hlo").read_text()
    module = parse_module(text.replace("4096", "48").replace("1024", "320"))
    build_gpu_pipeline().run_with(module, RunOptions())
    fusions = [i for i in module.entry.instructions
               if i.opcode == "fusion" and emitter_kind(i)[0] == "normalization"]
    counts = []
    for fusion in fusions:
        _check_structure(fusion, check(fusion, "normalization"))
        counts.append(sum(i.opcode == "reduce" for i in fusion.fused_computation().instructions))
    assert sorted(counts) == [2, 2, 5]


def test_launch_keeps_at_most_eight_row_elements_per_thread() -> None:
    for n, want in ((5, (32, 4)), (256, (32, 4)), (257, (64, 2)), (1024, (128, 1)), (1025, (256, 1)),
                    (8192, (1024, 1))):
        threads, per_block, _ = normalization_launch((16, n))
        assert (threads, per_block) == want, n
        assert -(-n // threads) <= 8


def test_the_row_is_loaded_once_per_slot() -> None:
    # layernorm reads x for the mean, the variance and the output: one load per slot, kept
    fusion = normalization_fusion(CASES["layernorm_one_warp_rows"])
    ir = print_kernel(check(fusion, "normalization"))
    x_buffer = f"arg{[op.shape.rank for op in fusion.operands].index(2)}"
    assert len(re.findall(rf"load @{x_buffer} ", ir)) == 2  # 64 elements, 32 threads: 2 slots
