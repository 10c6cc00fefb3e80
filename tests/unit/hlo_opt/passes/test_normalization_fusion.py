"""NormalizationFusion ("normalization-fusion"): a row reduction broadcast back and combined with
its own input becomes one kCustom "__norm" fusion, several reductions over the same rows in one.

Positive cases are the modules JAX emits (testdata/fusion/{softmax_f32,softmax_bf16,log_softmax,
layernorm_f32,rmsnorm_f32,rmsnorm_bf16}.hlo and testdata/softmax.hlo) through the whole gpu
pipeline: one kernel each, as XLA:GPU gets with its Triton softmax fusions. Small hand-written
modules run the pass alone, with the interpreter checking the numbers; negative cases leave the
module unchanged: a reduction that is not broadcast back, rows too long for a block, a column
reduction, an intermediate value read outside the diamond.

Recomputation: a layernorm backward (testdata/fusion/layernorm_grad.hlo at a small size) becomes
one fusion per output, each recomputing mean and variance from x (XLA's fusions), run through
the whole pipe (hlo-opt's pipeline, hlo-codegen for the host, the host runtime) against the
interpreter; two hand-written modules differ only in whether recomputing a shared row sum would
read an input the second output does not read otherwise (declined then).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pass_testlib import check_numerics, check_pass, check_unchanged, run_pass

from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis, fusion_kind_for_emitter
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_common.hlo.parser import parse_module

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "bench"))
from kernel_stats import kernel_stats  # noqa: E402  (bench/kernel_stats.py)

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
MAX = "mx { a = f32[] parameter(0) b = f32[] parameter(1) ROOT m = f32[] maximum(a, b) }\n"

SOFTMAX = "HloModule m\n" + MAX + ADD + """ENTRY e {
  x = f32[16,128] parameter(0)
  ni = f32[] constant(-inf)
  m = f32[16] reduce(x, ni), dimensions={1}, to_apply=mx
  bm = f32[16,128] broadcast(m), dimensions={0}
  s = f32[16,128] subtract(x, bm)
  ex = f32[16,128] exponential(s)
  z = f32[] constant(0)
  su = f32[16] reduce(ex, z), dimensions={1}, to_apply=add
  bs = f32[16,128] broadcast(su), dimensions={0}
  ROOT d = f32[16,128] divide(ex, bs)
}
// CHECK: %fused_computation
// CHECK: reduce({{.*}}), dimensions={1}, to_apply=%mx
// CHECK: reduce({{.*}}), dimensions={1}, to_apply=%add
// CHECK: ENTRY
// CHECK-NEXT: %x = f32[16,128]{1,0} parameter(0)
// CHECK-NEXT: ROOT %fusion = f32[16,128]{1,0} fusion(%x), kind=kCustom, calls=%fused_computation,
// CHECK-SAME: backend_config={"fusion_backend_config":{"kind":"__norm"}}
"""

# layernorm over [2,8,64] rows with a [2,8,1] reshape of the mean on the way (as jnp.mean with
# keepdims leaves it), scale and bias, and a bf16 output
LAYERNORM_3D = "HloModule m\n" + ADD + """ENTRY e {
  x = f32[2,8,64] parameter(0)
  g = f32[64] parameter(1)
  b = f32[64] parameter(2)
  z = f32[] constant(0)
  inv = f32[] constant(0.015625)
  binv = f32[2,8] broadcast(inv), dimensions={}
  sa = f32[2,8] reduce(x, z), dimensions={2}, to_apply=add
  mean = f32[2,8] multiply(sa, binv)
  mk = f32[2,8,1] reshape(mean)
  mr = f32[2,8] reshape(mk)
  bm = f32[2,8,64] broadcast(mr), dimensions={0,1}
  c = f32[2,8,64] subtract(x, bm)
  sq = f32[2,8,64] multiply(c, c)
  sb = f32[2,8] reduce(sq, z), dimensions={2}, to_apply=add
  var = f32[2,8] multiply(sb, binv)
  r = f32[2,8] rsqrt(var)
  br = f32[2,8,64] broadcast(r), dimensions={0,1}
  y = f32[2,8,64] multiply(c, br)
  bg = f32[2,8,64] broadcast(g), dimensions={2}
  yg = f32[2,8,64] multiply(y, bg)
  bb = f32[2,8,64] broadcast(b), dimensions={2}
  o = f32[2,8,64] add(yg, bb)
  ROOT ob = bf16[2,8,64] convert(o)
}
"""

RMSNORM_BF16 = "HloModule m\n" + ADD + """ENTRY e {
  x = bf16[32,256] parameter(0)
  g = bf16[256] parameter(1)
  xf = f32[32,256] convert(x)
  sq = f32[32,256] multiply(xf, xf)
  z = f32[] constant(0)
  s = f32[32] reduce(sq, z), dimensions={1}, to_apply=add
  inv = f32[] constant(0.00390625)
  binv = f32[32] broadcast(inv), dimensions={}
  ms = f32[32] multiply(s, binv)
  r = f32[32] rsqrt(ms)
  br = f32[32,256] broadcast(r), dimensions={0}
  y = f32[32,256] multiply(xf, br)
  yb = bf16[32,256] convert(y)
  bg = bf16[32,256] broadcast(g), dimensions={1}
  ROOT o = bf16[32,256] multiply(yb, bg)
}
"""


def _norm_fusions(module):
    return [i for i in module.entry.instructions if i.opcode == "fusion"
            and (i.backend_config_data or {}).get("fusion_backend_config", {}).get("kind") == "__norm"]


def test_softmax_becomes_one_custom_fusion():
    module = check_pass("normalization-fusion", SOFTMAX)
    check_numerics(SOFTMAX, module)
    fusion = _norm_fusions(module)[0]
    analysis = FusionAnalysis.of_fusion(fusion)
    assert analysis.emitter_kind == "normalization" and fusion_kind_for_emitter(analysis) == "kCustom"


@pytest.mark.parametrize("text", [LAYERNORM_3D, RMSNORM_BF16], ids=["layernorm_3d", "rmsnorm_bf16"])
def test_norms_with_scale_bias_and_converts_become_one_fusion(text):
    module, changed = run_pass("normalization-fusion", text)
    assert changed
    entry = [i.opcode for i in module.entry.instructions]
    assert entry.count("fusion") == 1 and set(entry) == {"parameter", "fusion"}, entry
    body = _norm_fusions(module)[0].fused_computation()
    assert sum(i.opcode == "reduce" for i in body.instructions) == (2 if "sb =" in text else 1)
    check_numerics(text, module, rtol=1e-2 if "bf16" in text else 1e-5)


JAX_MODULES = ["softmax_f32", "softmax_bf16", "log_softmax", "layernorm_f32", "rmsnorm_f32", "rmsnorm_bf16"]


def _gpu_pipeline(text: str, disabled: tuple[str, ...] = ()):
    from hlo_opt.pipelines import build_gpu_pipeline

    module = parse_module(text)
    build_gpu_pipeline().run_with(module, RunOptions(disabled_passes=frozenset(disabled)))
    return module


@pytest.mark.parametrize("name", JAX_MODULES + ["testdata_softmax"])
def test_jax_normalizations_launch_one_kernel_like_xla_with_triton(name):
    path = ROOT / "testdata" / ("softmax.hlo" if name == "testdata_softmax" else f"fusion/{name}.hlo")
    module = _gpu_pipeline(path.read_text())
    stats = kernel_stats(module)
    assert stats.count == 1, [k.name for k in stats.kernels]
    fusions = _norm_fusions(module)
    assert len(fusions) == 1
    body = fusions[0].fused_computation()
    want_reduces = 1 if name.startswith("rmsnorm") else 2
    assert sum(i.opcode == "reduce" for i in body.instructions) == want_reduces
    if name == "testdata_softmax":
        check_numerics(path.read_text(), module)
    # without the pass, priority fusion makes XLA's non-Triton kernels (2 or 3)
    assert kernel_stats(_gpu_pipeline(path.read_text(), ("normalization-fusion",))).count > 1


CAUSAL_SOFTMAX = "HloModule m\n" + MAX + ADD + """ENTRY e {
  x = f32[2,64,64] parameter(0)
  i0 = s32[64,64] iota(), iota_dimension=0
  i1 = s32[64,64] iota(), iota_dimension=1
  ge = pred[64,64] compare(i0, i1), direction=GE
  bge = pred[2,64,64] broadcast(ge), dimensions={1,2}
  big = f32[] constant(-1e9)
  bbig = f32[2,64,64] broadcast(big), dimensions={}
  xm = f32[2,64,64] select(bge, x, bbig)
  ni = f32[] constant(-inf)
  m = f32[2,64] reduce(xm, ni), dimensions={2}, to_apply=mx
  bm = f32[2,64,64] broadcast(m), dimensions={0,1}
  s = f32[2,64,64] subtract(xm, bm)
  ex = f32[2,64,64] exponential(s)
  z = f32[] constant(0)
  su = f32[2,64] reduce(ex, z), dimensions={2}, to_apply=add
  bs = f32[2,64,64] broadcast(su), dimensions={0,1}
  d = f32[2,64,64] divide(ex, bs)
  ROOT t = (f32[2,64,64], pred[64,64]) tuple(d, ge)
}
"""


def test_attention_mask_from_iotas_is_cloned_in():
    # the causal mask is computed inside the kernel; the mask itself stays for its other user
    module, changed = run_pass("normalization-fusion", CAUSAL_SOFTMAX)
    assert changed
    [fusion] = _norm_fusions(module)
    body = [i.opcode for i in fusion.fused_computation().instructions]
    assert body.count("iota") == 2 and "compare" in body and "select" in body
    assert [op.opcode for op in fusion.operands] == ["parameter"]
    assert module.entry.root.operands[1].opcode == "compare"
    check_numerics(CAUSAL_SOFTMAX, module)


def test_reduction_not_broadcast_back_is_left_alone():
    check_unchanged("normalization-fusion", "HloModule m\n" + ADD + """ENTRY e {
  x = f32[16,128] parameter(0)
  z = f32[] constant(0)
  e = f32[16,128] exponential(x)
  s = f32[16] reduce(e, z), dimensions={1}, to_apply=add
  ROOT n = f32[16] negate(s)
}""")


def test_rows_longer_than_a_block_are_left_alone():
    long_rows = SOFTMAX.split("// CHECK")[0].replace("[16,128]", "[4,16384]").replace("f32[16]", "f32[4]")
    check_unchanged("normalization-fusion", long_rows)
    # the limit is an option: 128-element rows over a limit of 64 are declined too
    check_unchanged("normalization-fusion", SOFTMAX.split("// CHECK")[0], max_row_elements=64)


def test_column_reduction_is_left_alone():
    check_unchanged("normalization-fusion", "HloModule m\n" + MAX + """ENTRY e {
  x = f32[128,16] parameter(0)
  ni = f32[] constant(-inf)
  m = f32[16] reduce(x, ni), dimensions={0}, to_apply=mx
  bm = f32[128,16] broadcast(m), dimensions={1}
  ROOT s = f32[128,16] subtract(x, bm)
}""")


def test_intermediate_read_outside_is_left_alone():
    # the row max is also an output (a second kernel would need it): no single-output fusion
    text = SOFTMAX.split("// CHECK")[0].replace(
        "ROOT d = f32[16,128] divide(ex, bs)",
        "d = f32[16,128] divide(ex, bs)\n  ROOT t = (f32[16,128], f32[16]) tuple(d, m)")
    check_unchanged("normalization-fusion", text)


def test_priority_fusion_leaves_the_fusion_alone():
    # the softmax output has two elementwise users priority fusion would like to fuse it into
    text = SOFTMAX.split("// CHECK")[0].replace(
        "ROOT d = f32[16,128] divide(ex, bs)", "d = f32[16,128] divide(ex, bs)\n  n = f32[16,128] negate(d)\n"
        "  l = f32[16,128] log(d)\n  ROOT t = (f32[16,128], f32[16,128]) tuple(n, l)")
    module, _ = run_pass("normalization-fusion", text)
    [fusion] = _norm_fusions(module)
    body = [i.opcode for i in fusion.fused_computation().instructions]
    from hlo_common.hlo_pass.pipeline import HloPassPipeline
    from hlo_opt.passes.priority_fusion import PriorityFusion

    HloPassPipeline("t", [PriorityFusion()]).run_with(module, RunOptions(verify_each=True))
    [after] = _norm_fusions(module)
    assert after is fusion and [i.opcode for i in after.fused_computation().instructions] == body
    assert [u.opcode for u in fusion.users] == ["negate", "log"]  # not fused into them
    check_numerics(text, module)


def test_deterministic_across_hash_seeds():
    src = ROOT / "testdata" / "transformer_layer.hlo"
    outs = set()
    for seed in ("0", "7"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run([sys.executable, "-m", "hlo_opt.cli", str(src)], capture_output=True, text=True,
                             env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        outs.add(res.stdout)
    assert len(outs) == 1


def test_in_the_fusion_pipeline_before_priority_fusion():
    from hlo_opt.pipelines import GPU_PIPELINES, PLANNED_PASSES

    fusion = next(s for s in GPU_PIPELINES if s.name == "fusion")
    names = [i.name for i in fusion.items]
    assert names.index("normalization-fusion") < names.index("priority-fusion")
    assert "normalization-fusion" not in PLANNED_PASSES


# -- recomputing shared row statistics ------------------------------------------------------------

def _layernorm_grad_small() -> str:
    """JAX's layernorm forward and backward (testdata/fusion/layernorm_grad.hlo), on [64,256]."""
    text = (ROOT / "testdata" / "fusion" / "layernorm_grad.hlo").read_text()
    return text.replace("4096", "64").replace("1024", "256")


def _row_reduces(comp):
    return [i for i in comp.instructions if i.opcode == "reduce" and i.operands[0].shape.rank == 2
            and list(i.attrs["dimensions"]) == [1]]


def test_layernorm_backward_recomputes_the_statistics_per_output_like_xla():
    import numpy as np

    text = _layernorm_grad_small()
    module = _gpu_pipeline(text)
    stats = kernel_stats(module)
    fusions = _norm_fusions(module)
    # XLA:GPU: three Triton fusions recomputing mean and variance, two column reductions
    assert stats.count == 5 and len(fusions) == 3, [k.name for k in stats.kernels]
    x = module.entry.parameters[0]
    assert not _row_reduces(module.entry)  # the shared statistics went with their last user
    counts = []
    for fusion in fusions:
        body = fusion.fused_computation()
        reduces = _row_reduces(body)
        counts.append(len(reduces))
        # each one computes the mean of x and the variance around it itself
        mean, var = reduces[0], reduces[1]
        assert mean.operands[0].opcode == "parameter"
        assert fusion.operands[mean.operands[0].parameter_number] is x
        assert mean in _ancestors(var)
    assert sorted(counts) == [2, 2, 5]  # the input gradient adds three reductions of its own
    others = [i for i in module.entry.instructions if i.opcode == "fusion" and i not in fusions]
    assert sorted(f.fused_computation().root.opcode for f in others) == ["reduce", "reduce"]
    assert all(list(f.fused_computation().root.attrs["dimensions"]) == [0] for f in others)
    # priority fusion alone launches more (9 at the bench's size, as XLA without Triton)
    assert kernel_stats(_gpu_pipeline(text, ("normalization-fusion",))).count > 5

    # the numbers: the whole pipe on the host against the interpreter on the input module
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.interpreter import evaluate
    from hlo_common.manifest.manifest import load_manifest
    from hlo_common.hlo.printer import print_module
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable
    from pass_testlib import random_arguments

    result = compile_module(parse_module(print_module(module)), CompileOptions(target="host"))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    source = parse_module(text)
    args = random_arguments(source, 0)
    got = ManifestExecutable(manifest, HostDevice()).run(args)
    want = evaluate(source, args)
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3, atol=1e-3)


def _ancestors(node):
    out, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n not in out:
            out.add(n)
            stack.extend(n.operands)
    return out


def _shared_row_sum(z_other: str) -> str:
    """Two outputs sharing the row sum m of y = w * v: c = y - m, and d = z - s * m for z = w + Z
    with s the row sum of z. Recomputing m inside d's fusion reads w and v; d's own path reads w
    and Z. A third output, exp(y), is no diamond: y stays for it."""
    return "HloModule m\n" + ADD + f"""ENTRY e {{
  w = f32[16,128] parameter(0)
  v = f32[16,128] parameter(1)
  u = f32[16,128] parameter(2)
  zero = f32[] constant(0)
  y = f32[16,128] multiply(w, v)
  m = f32[16] reduce(y, zero), dimensions={{1}}, to_apply=add
  bm = f32[16,128] broadcast(m), dimensions={{0}}
  c = f32[16,128] subtract(y, bm)
  z = f32[16,128] add(w, {z_other})
  s = f32[16] reduce(z, zero), dimensions={{1}}, to_apply=add
  r = f32[16] multiply(s, m)
  br = f32[16,128] broadcast(r), dimensions={{0}}
  d = f32[16,128] subtract(z, br)
  ey = f32[16,128] exponential(y)
  ROOT t = (f32[16,128], f32[16,128], f32[16,128]) tuple(c, d, ey)
}}
"""


def test_shared_row_sum_is_recomputed_where_it_reads_nothing_new():
    text = _shared_row_sum("v")
    module, changed = run_pass("normalization-fusion", text)
    assert changed
    c_fusion, d_fusion, ey = module.entry.root.operands
    assert c_fusion in _norm_fusions(module) and d_fusion in _norm_fusions(module)
    assert [len(_row_reduces(f.fused_computation())) for f in (c_fusion, d_fusion)] == [1, 2]
    # both read w and v and compute m themselves; y stays for exp, m has no user left
    for f in (c_fusion, d_fusion):
        assert sorted(op.name for op in f.operands) == ["v", "w"]
    assert ey.opcode == "exponential" and ey.operands[0].opcode == "multiply"
    assert not _row_reduces(module.entry)
    check_numerics(text, module)


def test_recomputation_that_would_read_another_input_is_declined():
    # d's path reads w and u; recomputing m would add a read of v: no fusion for d, and then
    # none for c either (m would still need a kernel of its own for d's unfused ops)
    check_unchanged("normalization-fusion", _shared_row_sum("u"))
