"""hlo_run.xla_cpu: running HLO text on real XLA:CPU through jax (checked against numpy)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("jax", reason="XLA:CPU is reached through jax (the `test` extra)")

from hlo_run.xla_cpu import XlaCpuExecutable, XlaCpuRejected, XlaCpuUnavailable, run_hlo_text  # noqa: E402


def test_runs_a_module_and_matches_numpy():
    text = """HloModule m
    ENTRY e { p = f32[2,3] parameter(0) q = f32[3] parameter(1)
      b = f32[2,3] broadcast(q), dimensions={1}
      ROOT r = f32[2,3] multiply(p, b) }"""
    p = np.arange(6, dtype=np.float32).reshape(2, 3)
    q = np.array([1, -2, 0.5], np.float32)
    np.testing.assert_array_equal(run_hlo_text(text, [p, q]), p * q)


def test_tuple_results_keep_their_structure():
    text = """ENTRY e { p = s64[2] parameter(0) n = s64[2] negate(p)
      c = pred[2] compare(p, n), direction=GT
      i = (pred[2], s64[2]) tuple(c, n)
      ROOT t = (s64[2], (pred[2], s64[2])) tuple(p, i) }"""
    big = np.array([1 << 40, -3], np.int64)  # 64-bit values survive (x64 is on during execution)
    out = run_hlo_text(text, [big])
    assert isinstance(out, tuple) and isinstance(out[1], tuple)
    np.testing.assert_array_equal(out[0], big)
    np.testing.assert_array_equal(out[1][0], [True, False])
    np.testing.assert_array_equal(out[1][1], -big)


def test_bf16_round_trip_and_repeated_runs():
    exe = XlaCpuExecutable.compile("ENTRY e { p = bf16[3] parameter(0) ROOT a = bf16[3] add(p, p) }")
    x = np.array([1.5, -0.25, 3], ml_dtypes.bfloat16)
    for _ in range(2):
        out = exe.run([x])
        assert out.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(out.astype(np.float32), [3.0, -0.5, 6.0])


@pytest.mark.parametrize("param", ["(f32[2], s32[]) parameter(0)", "token[] parameter(0)"])
def test_tuple_and_token_parameters_are_rejected_cleanly(param):
    text = f"ENTRY e {{ p = {param} ROOT c = f32[] constant(1) }}"
    with pytest.raises(XlaCpuRejected, match="cannot take the (tuple|token)-shaped entry parameter 0"):
        XlaCpuExecutable.compile(text)


def test_syntax_errors_come_back_as_one_line():
    with pytest.raises(XlaCpuRejected) as info:
        XlaCpuExecutable.compile("ENTRY e { ROOT x = f32[] addd() }")
    message = str(info.value)
    assert "XLA's parser rejects the module" in message and "addd" in message and "\n" not in message


def test_wrong_argument_count():
    exe = XlaCpuExecutable.compile("ENTRY e { p = f32[] parameter(0) ROOT n = f32[] negate(p) }")
    with pytest.raises(XlaCpuRejected, match="takes 1 argument"):
        exe.run([])


def test_missing_jax_is_a_clear_error(monkeypatch):
    import sys

    from hlo_run import xla_cpu

    xla_cpu._jax_modules.cache_clear()
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` now raises ImportError
    try:
        with pytest.raises(XlaCpuUnavailable, match="needs jax and jaxlib"):
            xla_cpu.XlaCpuExecutable.compile("ENTRY e { ROOT c = f32[] constant(1) }")
    finally:
        xla_cpu._jax_modules.cache_clear()


def test_modules_with_foreign_fusions_run_unfused():
    # XLA:CPU refuses a fusion its own pipeline did not form ("Fusion must have backend config");
    # as a call of the same computation it runs, with the same meaning.
    from hlo_common.hlo.parser import parse_module
    from hlo_run.xla_cpu import rewritten_text, text_for_xla_cpu

    text = """HloModule m
    fused { p0 = f32[4] parameter(0) p1 = f32[4] parameter(1) ROOT s = f32[4] subtract(p0, p1) }
    ENTRY e { a = f32[4] parameter(0) b = f32[4] parameter(1)
      ROOT f = f32[4] fusion(a, b), kind=kLoop, calls=fused, backend_config={"fusion_backend_config":{}} }"""
    module = parse_module(text)
    unfused = rewritten_text(module)
    assert "fusion(" not in unfused and "call(" in unfused and "to_apply=" in unfused
    assert text_for_xla_cpu(module, text) == unfused
    a, b = np.float32([1, 2, 3, 4]), np.float32([4, 3, 2, 1])
    np.testing.assert_array_equal(run_hlo_text(unfused, [a, b]), a - b)
    plain = "ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }"
    assert text_for_xla_cpu(parse_module(plain), plain) == plain


def test_elided_constants_reach_xla_with_the_parsers_values():
    from hlo_common.hlo.parser import parse_module
    from hlo_run.xla_cpu import text_for_xla_cpu

    text = "ENTRY e { c = f32[3] constant({...}) p = f32[3] parameter(0) ROOT a = f32[3] add(c, p) }"
    module = parse_module(text)
    stand_in = module.entry.instructions[0].literal
    assert module.entry.instructions[0].literal_unknown
    rewritten = text_for_xla_cpu(module, text)
    assert "{...}" not in rewritten
    x = np.float32([1, 2, 3])
    np.testing.assert_array_equal(run_hlo_text(rewritten, [x]), stand_in + x)
