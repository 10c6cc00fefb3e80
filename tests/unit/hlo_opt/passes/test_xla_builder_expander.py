"""XlaBuilderTestPass ("test-only-xla-builder") and the decompositions it attaches
(`hlo_common.hlo.xla_builder_math`): FileCheck patterns from XLA's own test files
(hlo/builder/tests/math_*.hlo), numbers against numpy (independent formulas), the interpreter
running a bare call and the whole pipe (hlo-codegen, host run) agreeing with it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_common.errors import HloError
from hlo_common.interpreter import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_run.backends.host import HostDevice
from hlo_run.manifest_runtime import ManifestExecutable
from pass_testlib import check_pass, check_unchanged, run_pass


def one(target: str, t: str = "f32", dims: str = "", arity: int = 1) -> str:
    params = " ".join(f"p{i} = {t}[{dims}] parameter({i})" for i in range(arity))
    operands = ", ".join(f"p{i}" for i in range(arity))
    return (f"HloModule m\nENTRY e {{ {params}\n  ROOT c = {t}[{dims}] custom-call({operands}), "
            f'custom_call_target="xla_builder.math.{target}" }}\n')


def test_atan_gets_its_decomposition_as_in_xla():
    check_pass("test-only-xla-builder", one("Atan") + """
// CHECK:      %[[ATAN:xla_builder.math.Atan]] (arg0: f32[]) -> f32[] {
// CHECK-NEXT:   %[[ARG:.*]] = f32[] parameter(0)
// CHECK-NEXT:   %[[ONE:.*]] = f32[] constant(1)
// CHECK-NEXT:   ROOT %{{.*}} = f32[] atan2(%[[ARG]], %[[ONE]])
// CHECK:      ENTRY
// CHECK:        ROOT %c = f32[] custom-call(%p0), custom_call_target="xla_builder.math.Atan",
// CHECK-SAME:     called_computations={%[[ATAN]]}
""")


def test_acos_real_decomposition_as_in_xla():
    check_pass("test-only-xla-builder", one("Acos", "f64") + """
// CHECK:      %xla_builder.math.Acos
// CHECK:        compare(%arg0, %{{.*}}), direction=NE
// CHECK:        atan2(%{{.*}}, %{{.*}})
// CHECK:        constant(3.1415926535897931)
// CHECK:        ROOT %{{.*}} = f64[] select(
""")


def test_calls_with_a_computation_are_left_alone_and_unknown_targets_are_named():
    check_unchanged("test-only-xla-builder",
                    "HloModule m\nENTRY e { p = f32[] parameter(0) ROOT n = f32[] negate(p) }")
    module, _ = run_pass("test-only-xla-builder", one("Cosh"))
    assert run_pass("test-only-xla-builder", str_module(module))[1] is False
    message = '%c: no decomposition of custom_call_target="xla_builder.math.Polygamma"'
    with pytest.raises(HloError, match=message):
        run_pass("test-only-xla-builder", one("Polygamma", arity=2))


def str_module(module) -> str:
    from hlo_common.hlo.printer import print_module

    return print_module(module)


REAL = np.concatenate([np.linspace(-3, 3, 61), [1e30, -1e30, 1, -1, 0, 1e-30, 0.9995]])
NUMPY = {"Acos": np.arccos, "Acosh": np.arccosh, "Asin": np.arcsin, "Asinh": np.arcsinh, "Atan": np.arctan,
         "Cosh": np.cosh}


@pytest.mark.parametrize("target", sorted(NUMPY))
@pytest.mark.parametrize("t, dtype, rtol", [("f32", np.float32, 2e-5), ("f64", np.float64, 1e-13)])
def test_real_functions_match_numpy_where_defined(target, t, dtype, rtol):
    module, _ = run_pass("test-only-xla-builder", one(target, t, str(len(REAL))))
    x = REAL.astype(dtype)
    with np.errstate(all="ignore"):
        got, want = evaluate(module, [x]), NUMPY[target](x.astype(np.float64))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-30)  # nan where numpy has nan


@pytest.mark.parametrize("target", ["Asin", "Asinh", "Cosh"])
@pytest.mark.parametrize("t, dtype, rtol", [("c64", np.complex64, 1e-5), ("c128", np.complex128, 1e-12)])
def test_complex_functions_match_numpy_off_the_branch_cuts(target, t, dtype, rtol):
    rng = np.random.default_rng(3)
    z = (rng.uniform(-3, 3, 200) + 1j * rng.uniform(-3, 3, 200)).astype(dtype)
    if target != "Cosh":  # far from 0 and huge: the overflow-safe paths
        z = np.concatenate([z, np.asarray([1e20 + 1e20j, -3e-25 + 0.5j, 1e-30 + 1e-30j], dtype)])
    module, _ = run_pass("test-only-xla-builder", one(target, t, str(len(z))))
    np.testing.assert_allclose(evaluate(module, [z]), NUMPY[target](z.astype(np.complex128)), rtol=rtol)


def test_asinh_on_the_imaginary_axis_follows_xla():
    z = np.asarray([2j, -2j, 0.5j], np.complex128)
    module, _ = run_pass("test-only-xla-builder", one("Asinh", "c128", "3"))
    got = evaluate(module, [z])
    # On the cut XLA keeps the real part positive: asinh(±2i) = ln(2 + sqrt 3) ± i pi/2 (both are
    # roots: sinh(a ± i pi/2) = ±i cosh(a) = ±2i); off it, asinh(0.5i) = i asin(0.5) = i pi/6.
    a = np.log(2 + np.sqrt(3))
    np.testing.assert_allclose(got, [a + 0.5j * np.pi, a - 0.5j * np.pi, 1j * np.pi / 6], rtol=1e-12)


@pytest.mark.parametrize("t, dtype", [("f32", np.float32), ("f64", np.float64)])
def test_next_after_matches_numpy_bit_for_bit(t, dtype):
    vals = np.asarray([0.0, -0.0, 1.0, -1.0, 1e-45, np.inf, -np.inf, np.nan, 3.5, -2.5, 5e-40], dtype)
    x, y = np.repeat(vals, len(vals)), np.tile(vals, len(vals))
    module, _ = run_pass("test-only-xla-builder", one("NextAfter", t, str(len(x)), arity=2))
    got, want = evaluate(module, [x, y]), np.nextafter(x, y)
    bits = f"u{got.itemsize}"
    assert np.all((got.view(bits) == want.view(bits)) | (np.isnan(got) & np.isnan(want)))


def test_next_after_without_negative_zero():
    t = ml_dtypes.float8_e5m2fnuz
    x = np.asarray([0x81, 0x00, 0x01, 0x7F], np.uint8).view(t)  # -denorm_min, 0, denorm_min, max
    y = np.concatenate([np.asarray([1, -1, 0], np.float32).astype(t), x[3:]])
    module, _ = run_pass("test-only-xla-builder", one("NextAfter", "f8e5m2fnuz", "4", arity=2))
    got = evaluate(module, [x, y]).view(np.uint8)
    assert list(got) == [0x00, 0x81, 0x00, 0x7F]  # -dmin -> +0 (no -0), 0 -> -dmin, dmin -> 0, y == max


def test_bare_calls_mean_the_same_in_the_interpreter_and_on_the_host_pipe():
    text = one("Asin", "c64", "40")
    z = (np.linspace(-2, 2, 40) + 1j * np.linspace(1.5, -1.5, 40)).astype(np.complex64)
    bare = evaluate(parse_module(text), [z])
    expanded, _ = run_pass("test-only-xla-builder", text)
    np.testing.assert_array_equal(bare, evaluate(expanded, [z]))
    manifest = compile_module(parse_module(text), CompileOptions(target="host")).manifest
    host = ManifestExecutable(load_manifest(manifest.to_bytes(), "m.json"), HostDevice()).run([z])
    np.testing.assert_allclose(host, bare, rtol=1e-5, atol=1e-6)
