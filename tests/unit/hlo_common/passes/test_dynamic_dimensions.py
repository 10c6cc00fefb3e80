"""Bounded dynamic dimensions in hlo-codegen (`hlo_common.passes.bounded_dynamic_dimensions`): each
hand-written module goes through hlo-codegen for the host and runs on hlo-run's host runtime; the result must
equal numpy's answer (derived by hand from the rule "every `<=N` dimension is N": get-dimension-size
is the bound, set-dimension-size / SetBound / SliceToDynamic pass the operand on, PadToStatic adds
the bounds) and the reference interpreter evaluating the *original* module, dynamic shapes and
all. Unbounded dimensions (`?`) keep the one-line refusal."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from emitter_testlib import entry_arguments
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.passes.bounded_dynamic_dimensions import static_shape
from hlo_common.errors import HloError
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape import Shape
from hlo_run.compare import flatten_leaves

# name -> (entry text, numpy's result from the arguments)
CASES = {
    "bounded_parameter_through_an_add": ("""ENTRY e { p = f32[<=8] parameter(0) q = f32[8] parameter(1)
        ROOT a = f32[<=8] add(p, q) }""", lambda a: [a[0] + a[1]]),
    "two_bounded_dimensions_and_a_tuple": ("""ENTRY e { p = f32[<=3,<=5]{0,1} parameter(0)
        n = f32[<=3,<=5]{0,1} negate(p)  m = f32[<=3,<=5]{0,1} multiply(p, p)
        ROOT t = (f32[<=3,<=5]{0,1}, f32[<=3,<=5]{0,1}) tuple(n, m) }""", lambda a: [-a[0], a[0] * a[0]]),
    "get_dimension_size_is_the_bound": ("""ENTRY e { p = f32[3,<=5] parameter(0)
        s = s32[] get-dimension-size(p), dimensions={1}  c = f32[] convert(s)
        b = f32[3,<=5] broadcast(c), dimensions={}  m = f32[3,<=5] multiply(p, b)
        r = s32[] get-dimension-size(p), dimensions={0}
        ROOT t = (f32[3,<=5], s32[], s32[]) tuple(m, s, r) }""",
        lambda a: [a[0] * 5, np.int32(5), np.int32(3)]),
    "get_dimension_size_of_a_static_shape": ("""ENTRY e { p = f32[7,2] parameter(0)
        ROOT s = s32[] get-dimension-size(p), dimensions={0} }""", lambda a: [np.int32(7)]),
    "set_dimension_size_passes_the_operand_on": ("""ENTRY e { p = f32[4,6] parameter(0)
        n = s32[] constant(2)  d = f32[4,<=6] set-dimension-size(p, n), dimensions={1}
        ROOT r = f32[4,<=6] negate(d) }""", lambda a: [-a[0]]),
    "set_dimension_size_at_the_root": ("""ENTRY e { p = s32[5] parameter(0) n = s32[] parameter(1)
        ROOT d = s32[<=5] set-dimension-size(p, n), dimensions={0} }""", lambda a: [a[0]]),
    "pad_to_static_adds_the_bounds": ("""ENTRY e { p = s32[2,<=3] parameter(0)
        ROOT s = (s32[2,3], s32[], s32[]) custom-call(p), custom_call_target="PadToStatic" }""",
        lambda a: [a[0], np.int32(2), np.int32(3)]),
    "slice_to_dynamic_passes_the_operand_on": ("""ENTRY e { p = f32[2,3] parameter(0)
        a = s32[] constant(2)  b = s32[] constant(1)
        s = f32[2,<=3] custom-call(p, a, b), custom_call_target="SliceToDynamic"
        ROOT x = f32[2,<=3] exponential(s) }""", lambda a: [np.exp(a[0])]),
    "slice_to_dynamic_then_pad_to_static": ("""ENTRY e { p = f32[4,3] parameter(0)
        a = s32[] constant(1)  b = s32[] constant(3)
        s = f32[<=4,3] custom-call(p, a, b), custom_call_target="SliceToDynamic"
        ROOT t = (f32[4,3], s32[], s32[]) custom-call(s), custom_call_target="PadToStatic" }""",
        lambda a: [a[0], np.int32(4), np.int32(3)]),
    "set_bound_passes_the_operand_on": ("""ENTRY e { p = f32[2,3] parameter(0)
        b = f32[2,3] custom-call(p), custom_call_target="SetBound", literal=s32[] 1
        ROOT a = f32[2,3] add(b, p) }""", lambda a: [2 * a[0]]),
    "dynamic_reshape_at_the_bounds_is_a_reshape": ("""ENTRY e { p = f32[6] parameter(0)
        a = s32[] parameter(1)  b = s32[] parameter(2)
        r = f32[<=2,<=3] dynamic-reshape(p, a, b)  ROOT n = f32[<=2,<=3] negate(r) }""",
        lambda a: [-a[0].reshape(2, 3)]),
    "bounded_shapes_inside_a_fusion": ("""fused { x = f32[<=4,2] parameter(0) y = f32[<=4,2] parameter(1)
          ROOT s = f32[<=4,2] subtract(x, y) }
        ENTRY e { p = f32[<=4,2] parameter(0) q = f32[4,2] parameter(1)
          ROOT f = f32[<=4,2] fusion(p, q), kind=kLoop, calls=fused }""", lambda a: [a[0] - a[1]]),
}
HEADERS = {"bounded_parameter_through_an_add":
           ", entry_computation_layout={(f32[<=8]{0}, f32[8]{0})->f32[<=8]{0}}"}


def module_text(name: str) -> str:
    return f"HloModule {name}{HEADERS.get(name, '')}\n{CASES[name][0]}"


def run_on_host(text: str, args: list[np.ndarray]):
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    result = compile_module(parse_module(text), CompileOptions(target="host"))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    return ManifestExecutable(manifest, HostDevice()).run(args), manifest


@pytest.mark.parametrize("name", list(CASES))
def test_host_pipe_matches_numpy_and_the_interpreter(name):
    text = module_text(name)
    args = entry_arguments(parse_module(text), seed=3, int_range=(1, 4))
    got, manifest = run_on_host(text, args)
    got = flatten_leaves(got)
    reference = flatten_leaves(evaluate(parse_module(text), args))
    by_hand = CASES[name][1](args)
    assert len(got) == len(reference) == len(by_hand)
    for g, r, h in zip(got, reference, by_hand):
        assert g.shape == np.shape(h) and g.dtype == np.asarray(h).dtype
        np.testing.assert_allclose(g, h, rtol=1e-6)
        np.testing.assert_allclose(g, r, rtol=1e-6)
    # The manifest's HLO (what the reference runs) and its entry signature are static.
    assert "<=" not in manifest.hlo
    assert not any("<=" in p for p in manifest.entry.parameter_shapes)
    assert "<=" not in manifest.entry.result_shape
    reparsed = parse_module(manifest.hlo)
    assert [tuple(p.shape.dims) for p in reparsed.entry.parameters] == [a.shape for a in args]
    for op in ("get-dimension-size", "set-dimension-size", "dynamic-reshape", "PadToStatic", "SliceToDynamic",
               "SetBound"):
        assert op not in manifest.hlo


def test_the_entry_computation_layout_becomes_static():
    _, manifest = run_on_host(module_text("bounded_parameter_through_an_add"),
                              [np.ones(8, np.float32), np.ones(8, np.float32)])
    assert "entry_computation_layout={(f32[8]{0}, f32[8]{0})->f32[8]{0}}" in manifest.hlo
    assert manifest.entry.parameter_shapes == ("f32[8]{0}", "f32[8]{0}")


def test_static_shape_keeps_unbounded_dimensions_and_layouts():
    shape = replace(Shape.array("s32", (2, 3, 4), None), dynamic=("<=", "", "?"))
    assert static_shape(shape).to_string() == "s32[2,3,?]"
    bounded = parse_module("ENTRY e { ROOT p = (f32[<=3,2]{0,1}, pred[<=7]) parameter(0) }").entry.root.shape
    assert static_shape(bounded).to_string() == "(f32[3,2]{0,1}, pred[7]{0})"
    static = Shape.array("f32", (2,))
    assert static_shape(static) is static


@pytest.mark.parametrize("entry, shape", [
    ("p = f32[?] parameter(0) ROOT n = f32[?] negate(p)", r"f32\[\?\]"),
    ("p = f32[<=4,?] parameter(0) s = s32[] get-dimension-size(p), dimensions={0}\n"
     "ROOT t = (f32[<=4,?], s32[]) tuple(p, s)", r"f32\[<=4,\?\]"),
])
def test_unbounded_dimensions_are_still_refused(entry, shape):
    with pytest.raises(HloError, match=rf"^%p: dynamic shape {shape} is not supported by hlo-codegen "
                                       r"\(in computation e\)$"):
        compile_module(parse_module(f"HloModule m\nENTRY e {{ {entry} }}"), CompileOptions(target="host"))


def test_dynamic_reshape_that_is_not_a_reshape_at_the_bounds_is_refused():
    text = """HloModule m
    ENTRY e { p = f32[6] parameter(0) a = s32[] parameter(1) b = s32[] parameter(2)
      ROOT r = f32[<=4,<=3] dynamic-reshape(p, a, b) }"""
    with pytest.raises(HloError, match=r"^%r \(dynamic-reshape\): the bounds of f32\[4,3\]\{1,0\} hold 12 "
                                       r"elements, the operand f32\[6\]\{0\} 6"):
        compile_module(parse_module(text), CompileOptions(target="host"))


def test_cuda_ptx_links():
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX linking needs nvJitLink")
    for name in ("two_bounded_dimensions_and_a_tuple", "pad_to_static_adds_the_bounds",
                 "dynamic_reshape_at_the_bounds_is_a_reshape"):
        result = compile_module(parse_module(module_text(name)), CompileOptions(target="cuda"))
        assert "<=" not in result.manifest.hlo
