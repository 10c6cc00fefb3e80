"""Nested fusions (`hlo_common.passes.nested_fusions`): a fusion inside a fused reducer and a fusion
inside a fused computation are inlined before emission; the host pipe's numbers match numpy by
hand, the nested computations are gone from the compiled module, and a module without nested
fusions is left as it was."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.passes._support import global_computations
from hlo_common.passes.nested_fusions import inline_nested_fusions
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_run.backends.host import HostDevice
from hlo_run.manifest_runtime import ManifestExecutable

# The reducer adds through a nested fusion that rounds both summands and the sum to bf16.
NESTED_REDUCER = """HloModule nested_reducer
bf16_add { p0 = f32[] parameter(0) p1 = f32[] parameter(1) c0 = bf16[] convert(p0) c1 = bf16[] convert(p1)
  a = bf16[] add(c0, c1) ROOT o = f32[] convert(a) }
add_computation { p0 = f32[] parameter(0) p1 = f32[] parameter(1)
  ROOT fusion = f32[] fusion(p0, p1), kind=kLoop, calls=bf16_add }
body { p0 = pred[4,16] parameter(0) f = f32[4,16] convert(p0) zero = f32[] constant(0)
  r = f32[4] reduce(f, zero), dimensions={1}, to_apply=add_computation
  b = f32[4,16] broadcast(r), dimensions={0} ROOT add = f32[4,16] add(f, b) }
ENTRY main { p0 = pred[4,16] parameter(0)
  ROOT triton_fusion = f32[4,16] fusion(p0), kind=kCustom, calls=body }
"""

# A two-level nest: the inner fusion's body holds a fusion itself.
NESTED_TWICE = """HloModule nested_twice
innermost { x = f32[6] parameter(0) ROOT e = f32[6] exponential(x) }
inner { x = f32[6] parameter(0) y = f32[6] parameter(1)
  f = f32[6] fusion(x), kind=kLoop, calls=innermost ROOT m = f32[6] multiply(f, y) }
outer { a = f32[6] parameter(0) b = f32[6] parameter(1)
  n = f32[6] fusion(a, b), kind=kLoop, calls=inner ROOT s = f32[6] subtract(n, a) }
ENTRY main { a = f32[6] parameter(0) b = f32[6] parameter(1)
  ROOT r = f32[6] fusion(a, b), kind=kLoop, calls=outer }
"""


def run_host(text: str, args: list[np.ndarray]) -> tuple[list[np.ndarray], str]:
    result = compile_module(parse_module(text), CompileOptions(target="host"))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    out = ManifestExecutable(manifest, HostDevice()).run(args)
    return (list(out) if isinstance(out, tuple) else [out]), print_module(result.module)


def bf16(x: float) -> float:
    return float(np.float32(x).astype(ml_dtypes.bfloat16))


def test_nested_reducer_fusion_on_host() -> None:
    rng = np.random.default_rng(3)
    p = rng.random((4, 16)) < 0.5
    (got,), compiled = run_host(NESTED_REDUCER, [p])
    want = np.zeros((4, 16), np.float32)
    for i in range(4):
        acc = 0.0
        for j in range(16):
            acc = bf16(bf16(acc) + bf16(float(p[i, j])))
        want[i] = p[i].astype(np.float32) + np.float32(acc)
    np.testing.assert_array_equal(got, want)
    assert "calls=bf16_add" not in compiled and "bf16_add {" not in compiled


def test_two_levels_inlined() -> None:
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(6).astype(np.float32) for _ in range(2))
    (got,), compiled = run_host(NESTED_TWICE, [a, b])
    np.testing.assert_allclose(got, np.exp(a.astype(np.float64)) * b - a, rtol=1e-5, atol=1e-6)
    assert "calls=inner" not in compiled and "calls=innermost" not in compiled


def test_no_nested_fusion_changes_nothing() -> None:
    text = NESTED_TWICE.replace("f = f32[6] fusion(x), kind=kLoop, calls=innermost",
                                "f = f32[6] exponential(x)")
    text = text.replace("n = f32[6] fusion(a, b), kind=kLoop, calls=inner", "n = f32[6] multiply(a, b)")
    module = parse_module(text)
    before = print_module(module)
    assert inline_nested_fusions(module, global_computations(module)) == 0
    assert print_module(module) == before
