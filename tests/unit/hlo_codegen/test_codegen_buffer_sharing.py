"""Buffer sharing the kernels can honour, through the whole codegen pipe on the host: a variadic
scatter updates operand k in the buffer of output k only, an elementwise op whose output type
differs from its operand's (a `convert`) gets a buffer of its own, and a must-alias entry output
whose root reads the aliased parameter gets a copy placed after the root. Expected numbers come
from numpy / ml_dtypes, never from the code under test."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_codegen.buffer_assignment import assign_buffers, check_buffer_assignment
from hlo_codegen.compiler import CompileOptions, compile_module, prepare_module
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module


def run_host(text: str, args: list[np.ndarray]):
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    result = compile_module(parse_module(text), CompileOptions(target="host"))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    return ManifestExecutable(manifest, HostDevice()).run([a.copy() for a in args])


VARIADIC_SCATTER = """HloModule variadic
comb {
  a0 = f32[] parameter(0) a1 = s32[] parameter(1) v0 = f32[] parameter(2) v1 = s32[] parameter(3)
  r0 = f32[] add(a0, v0) r1 = s32[] multiply(a1, v1)
  ROOT t = (f32[], s32[]) tuple(r0, r1)
}
ENTRY e {
  p0 = f32[8,3] parameter(0) p1 = s32[8,3] parameter(1) i = s32[4,1] parameter(2)
  w0 = f32[4,3] parameter(3) w1 = s32[4,3] parameter(4)
  a = f32[8,3] negate(p0) b = s32[8,3] negate(p1)
  ROOT s = (f32[8,3], s32[8,3]) scatter(a, b, i, w0, w1), update_window_dims={1},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}"""


def _scatter_args():
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal((8, 3)).astype(np.float32)
    p1 = rng.integers(-5, 6, (8, 3)).astype(np.int32)
    i = np.array([[1], [6], [1], [9]], np.int32)  # a duplicate, and 9 out of bounds (skipped)
    u0 = rng.standard_normal((4, 3)).astype(np.float32)
    u1 = rng.integers(-3, 4, (4, 3)).astype(np.int32)
    return [p0, p1, i, u0, u1]


def test_variadic_scatter_outputs_share_only_their_own_operand() -> None:
    module = parse_module(VARIADIC_SCATTER)
    prepare_module(module)
    ba = assign_buffers(module)
    assert check_buffer_assignment(ba) == []
    root = module.entry.root
    slices = [ba.get_slice(root.operands[k], ()) for k in range(2)]
    assert ba.get_slice(root, (0,)) != slices[1] and ba.get_slice(root, (1,)) != slices[0]

    p0, p1, i, u0, u1 = args = _scatter_args()
    want0, want1 = -p0, -p1
    for n, row in enumerate(i[:, 0]):
        if 0 <= row < 8:
            want0[row] += u0[n]
            want1[row] *= u1[n]
    got0, got1 = run_host(VARIADIC_SCATTER, args)
    np.testing.assert_allclose(np.asarray(got0), want0, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(got1), want1)


@pytest.mark.parametrize("chain", [("f32", "s32"), ("f32", "f8e5m2", "f8e4m3fn", "f8e4m3fnuz", "f32")])
def test_convert_to_another_type_of_the_same_width_gets_its_own_buffer(chain) -> None:
    lines = ["p = f32[6] parameter(0)", "c0 = f32[6] negate(p)"]
    for k, t in enumerate(chain[1:], 1):
        lines.append(f"c{k} = {t}[6] convert(c{k - 1})")
    lines[-1] = "ROOT " + lines[-1]
    text = "HloModule chain\nENTRY e {\n  " + "\n  ".join(lines) + "\n}"
    x = np.array([0.3, -1.75, 2.5, 7.0, -0.0625, 100.0], np.float32)
    want = -x
    for t in chain[1:]:
        named = {"s32": np.int32, "f32": np.float32}
        dtype = named[t] if t in named else getattr(ml_dtypes, t.replace("f8", "float8_"))
        want = want.astype(dtype)
    (got,) = (run_host(text, [x]),)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), want.astype(np.float64))


MUST_ALIAS = """HloModule must_alias, input_output_alias={ {}: (0, {}, must-alias) }
ENTRY f {
  a = s32[10] parameter(0)
  ROOT sum = s32[10] add(a, a)
}"""


def test_must_alias_output_whose_root_reads_the_parameter_twice() -> None:
    module = parse_module(MUST_ALIAS)
    prepare_module(module)
    root = module.entry.root
    assert root.opcode == "copy" and module.entry.instructions.index(root) > \
        module.entry.instructions.index(root.operands[0])
    a = np.arange(-4, 6, dtype=np.int32)
    got = run_host(MUST_ALIAS, [a])
    np.testing.assert_array_equal(np.asarray(got), a * 2)
