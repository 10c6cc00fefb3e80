"""Whole modules fused the way XLA:GPU fuses them, through all of hlo-codegen (buffer assignment,
which decides the in-place outputs, thunks, the manifest) and run by hlo-run's runtime on the
host against the interpreter; compiled for `cuda` too, where every kernel's PTX is linked for
sm_90 by nvJitLink.

The modules follow the structure of XLA's optimized HLO (xla_gpu_hlo.py, Triton off) for a
softmax (two reduction kernels and a loop), a layernorm backward pass (multi-output loop and
reduction fusions), an argmax and a `fori_loop` whose body holds a DUS fusion, a reduction with
a side output and the loop counter's fusion; written here as our own small text.
"""

from __future__ import annotations

import numpy as np
import pytest

from emitter_testlib import assert_close, entry_arguments, nvjitlink_available
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
MAX = "mx { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, b) }\n"

MODULES = {
    "softmax_bf16": ADD + MAX + """
fmax { p = bf16[64,512] parameter(0) c = f32[64,512] convert(p) mi = f32[] constant(-inf)
  ROOT r = f32[64] reduce(c, mi), dimensions={1}, to_apply=mx }
fsum { p = bf16[64,512] parameter(0) m = f32[64] parameter(1) c = f32[64,512] convert(p)
  bm = f32[64,512] broadcast(m), dimensions={0} s = f32[64,512] subtract(c, bm) e = f32[64,512] exponential(s)
  z = f32[] constant(0) ROOT r = f32[64] reduce(e, z), dimensions={1}, to_apply=add }
fdiv { p = bf16[64,512] parameter(0) m = f32[64] parameter(1) d = f32[64] parameter(2)
  c = f32[64,512] convert(p) bm = f32[64,512] broadcast(m), dimensions={0} s = f32[64,512] subtract(c, bm)
  e = f32[64,512] exponential(s) bd = f32[64,512] broadcast(d), dimensions={0} q = f32[64,512] divide(e, bd)
  ROOT o = bf16[64,512] convert(q) }
ENTRY e { x = bf16[64,512] parameter(0)
  m = f32[64] fusion(x), kind=kInput, calls=fmax
  s = f32[64] fusion(x, m), kind=kInput, calls=fsum
  ROOT o = bf16[64,512] fusion(x, m, s), kind=kLoop, calls=fdiv }""",
    "layernorm_backward": ADD + """
fstats { x = f32[128,256] parameter(0) g = f32[128,256] parameter(1) z = f32[] constant(0)
  xg = f32[128,256] multiply(x, g) r1 = f32[128] reduce(g, z), dimensions={1}, to_apply=add
  r2 = f32[128] reduce(xg, z), dimensions={1}, to_apply=add
  ROOT t = (f32[128], f32[128], f32[128,256]) tuple(r1, r2, xg) }
fcols { g = f32[128,256] parameter(0) xg = f32[128,256] parameter(1) z = f32[] constant(0)
  r1 = f32[256] reduce(g, z), dimensions={0}, to_apply=add r2 = f32[256] reduce(xg, z), dimensions={0},
        to_apply=add
  ROOT t = (f32[256], f32[256]) tuple(r1, r2) }
fdx { x = f32[128,256] parameter(0) g = f32[128,256] parameter(1) a = f32[128] parameter(2) b =
        f32[128] parameter(3)
  k = f32[] constant(0.00390625) bk = f32[128] broadcast(k), dimensions={} am = f32[128] multiply(a, bk)
  bm = f32[128] multiply(b, bk) ba = f32[128,256] broadcast(am), dimensions={0}
  bb = f32[128,256] broadcast(bm), dimensions={0} s = f32[128,256] subtract(g, ba) xb = f32[128,256]
        multiply(x, bb)
  dx = f32[128,256] subtract(s, xb) n = f32[128,256] negate(dx)
  ROOT t = (f32[128,256], f32[128,256]) tuple(dx, n) }
ENTRY e { x = f32[128,256] parameter(0) g = f32[128,256] parameter(1)
  st = (f32[128], f32[128], f32[128,256]) fusion(x, g), kind=kInput, calls=fstats
  r1 = f32[128] get-tuple-element(st), index=0 r2 = f32[128] get-tuple-element(st), index=1
  xg = f32[128,256] get-tuple-element(st), index=2
  cs = (f32[256], f32[256]) fusion(g, xg), kind=kInput, calls=fcols
  dx = (f32[128,256], f32[128,256]) fusion(x, g, r1, r2), kind=kLoop, calls=fdx
  c0 = f32[256] get-tuple-element(cs), index=0 c1 = f32[256] get-tuple-element(cs), index=1
  d0 = f32[128,256] get-tuple-element(dx), index=0 d1 = f32[128,256] get-tuple-element(dx), index=1
  ROOT t = (f32[256], f32[256], f32[128,256], f32[128,256]) tuple(c0, c1, d0, d1) }""",
    "argmax_and_transpose": """am { v0 = f32[] parameter(0) i0 = s32[] parameter(1) v1 = f32[]
        parameter(2) i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT tie = pred[] and(eq, lt) k = pred[] or(gt, tie)
  v = f32[] select(k, v0, v1) i = s32[] select(k, i0, i1) ROOT t = (f32[], s32[]) tuple(v, i) }
fam { p = f32[1000,128] parameter(0) t = f32[128,1000] transpose(p), dimensions={1,0}
  io = s32[128,1000] iota(), iota_dimension=1 mi = f32[] constant(-inf) z = s32[] constant(0)
  ROOT r = (f32[128], s32[128]) reduce(t, io, mi, z), dimensions={1}, to_apply=am }
ftr { p = f32[1000,128] parameter(0) t = f32[128,1000] transpose(p), dimensions={1,0}
  ROOT e = f32[128,1000] exponential(t) }
ENTRY e { x = f32[1000,128] parameter(0)
  r = (f32[128], s32[128]) fusion(x), kind=kInput, calls=fam
  i = s32[128] get-tuple-element(r), index=1
  t = f32[128,1000] fusion(x), kind=kInput, calls=ftr
  ROOT o = (s32[128], f32[128,1000]) tuple(i, t) }""",
    "fori_loop_body_fusions": ADD + """
fdus { acc = f32[64,128] parameter(0) u = f32[4,128] parameter(1) i = s32[] parameter(2)
  fi = f32[] convert(i) bf = f32[4,128] broadcast(fi), dimensions={} m = f32[4,128] multiply(u, bf)
  four = s32[] constant(4) st = s32[] multiply(i, four) z = s32[] constant(0)
  ROOT d = f32[64,128] dynamic-update-slice(acc, m, st, z) }
fred { acc = f32[64,128] parameter(0) t = f32[64,128] tanh(acc) z = f32[] constant(0)
  r = f32[64] reduce(t, z), dimensions={1}, to_apply=add ROOT o = (f32[64], f32[64,128]) tuple(r, t) }
finc { i = s32[] parameter(0) one = s32[] constant(1) ROOT a = s32[] add(i, one) }
flt { i = s32[] parameter(0) n = s32[] constant(16) ROOT c = pred[] compare(i, n), direction=LT }
cond { t = (s32[], f32[64,128], f32[4,128], f32[64]) parameter(0) i = s32[] get-tuple-element(t), index=0
  ROOT c = pred[] fusion(i), kind=kLoop, calls=flt }
body { t = (s32[], f32[64,128], f32[4,128], f32[64]) parameter(0) i = s32[] get-tuple-element(t), index=0
  acc = f32[64,128] get-tuple-element(t), index=1 u = f32[4,128] get-tuple-element(t), index=2
  d = f32[64,128] fusion(acc, u, i), kind=kLoop, calls=fdus
  rt = (f32[64], f32[64,128]) fusion(d), kind=kInput, calls=fred
  r = f32[64] get-tuple-element(rt), index=0 th = f32[64,128] get-tuple-element(rt), index=1
  n = s32[] fusion(i), kind=kLoop, calls=finc
  ROOT o = (s32[], f32[64,128], f32[4,128], f32[64]) tuple(n, d, u, r) }
ENTRY e { x = f32[64,128] parameter(0) u = f32[4,128] parameter(1) z = s32[] constant(0)
  zr = f32[] constant(0) r0 = f32[64] broadcast(zr), dimensions={}
  t = (s32[], f32[64,128], f32[4,128], f32[64]) tuple(z, x, u, r0)
  w = (s32[], f32[64,128], f32[4,128], f32[64]) while(t), condition=cond, body=body
  a = f32[64,128] get-tuple-element(w), index=1 r = f32[64] get-tuple-element(w), index=3
  ROOT o = (f32[64,128], f32[64]) tuple(a, r) }""",
}


def _compile(name: str, target: str):
    module = parse_module("HloModule " + name + "\n" + MODULES[name])
    result = compile_module(module, CompileOptions(target=target))
    return load_manifest(result.manifest.to_bytes(), "m.json")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_fused_module_on_host_matches_the_interpreter(name: str) -> None:
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    manifest = _compile(name, "host")
    if name == "fori_loop_body_fusions":  # the loop-carried buffer is updated in place
        assert manifest.kernels["d"].grid == (4, 1, 1)  # one thread per update element
    module = parse_module("HloModule " + name + "\n" + MODULES[name])
    args = entry_arguments(module, 0)
    got = ManifestExecutable(manifest, HostDevice()).run(args)
    want = evaluate(module, args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    shapes = [s for _, s in module.entry.root.shape.leaf_shapes()]
    assert len(got) == len(shapes)
    for k, (g, w, s) in enumerate(zip(got, want, shapes)):
        assert_close(np.asarray(g), np.asarray(w), s, None, f"{name} output {k}")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_fused_module_links_for_sm90(name: str) -> None:
    if not nvjitlink_available():
        pytest.skip("nvJitLink (cuda.bindings) is not importable")
    manifest = _compile(name, "cuda")
    module = parse_module("HloModule " + name + "\n" + MODULES[name])
    fusions = {i.name for c in module.computations for i in c.instructions if i.opcode == "fusion"}
    assert fusions <= set(manifest.kernels)  # one kernel per fusion, none refused or split
    assert all(".target sm_90" in k.ptx for k in manifest.kernels.values())
