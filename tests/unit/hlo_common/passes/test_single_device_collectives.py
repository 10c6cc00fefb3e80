"""Collectives and async copies on one device (`hlo_common.passes.single_device_collectives`): each
hand-written module goes through hlo-codegen for the host, the manifest runs on hlo-run's host
runtime, and the result is compared with the reference interpreter evaluating the *original*
module (the manifest's HLO keeps the collectives too, but the original text is the independent
reference). Where the answer
is plain (the operand itself, zeros) numpy checks it as well. A group of two devices, or an empty
group in a module of two replicas, must give the one-line "needs N devices" error; cuda compiles
to PTX that links."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from emitter_testlib import entry_arguments
from hlo_codegen.cli import cli
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.errors import HloError
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_run.compare import flatten_leaves

ADD = "add { x = f32[] parameter(0) y = f32[] parameter(1) ROOT s = f32[] add(x, y) }\n"

# name -> (module text, what numpy says the result is, from the arguments)
CASES = {
    "all_reduce_group_of_one": ("""ENTRY e { p = f32[4,3] parameter(0)
        ROOT r = f32[4,3] all-reduce(p), replica_groups={{0}}, to_apply=add }""", lambda a: [a[0]]),
    "variadic_all_reduce_no_groups": ("""ENTRY e { p = f32[8] parameter(0) q = f32[] parameter(1)
        r = (f32[8], f32[]) all-reduce(p, q), replica_groups={}, to_apply=add
        a = f32[8] get-tuple-element(r), index=0  b = f32[] get-tuple-element(r), index=1
        ROOT t = (f32[8], f32[]) tuple(a, b) }""", lambda a: [a[0], a[1]]),
    "all_gather_reduce_scatter_all_to_all_broadcast": ("""ENTRY e { p = f32[2,6] parameter(0)
        g = f32[2,6] all-gather(p), replica_groups={{0}}, dimensions={1}
        s = f32[2,6] reduce-scatter(g), replica_groups=[1,1]<=[1], dimensions={0}, to_apply=add
        t = f32[2,6] all-to-all(s), replica_groups={{0}}, dimensions={1}
        ROOT b = f32[2,6] collective-broadcast(t), replica_groups={} }""", lambda a: [a[0]]),
    "collective_permute_to_itself": ("""ENTRY e { p = s32[5] parameter(0)
        ROOT c = s32[5] collective-permute(p), source_target_pairs={{0,0}} }""", lambda a: [a[0]]),
    "collective_permute_to_another_device_gives_zeros": ("""ENTRY e { p = f32[3,5] parameter(0)
        ROOT c = f32[3,5] collective-permute(p), source_target_pairs={{0,1},{1,0}} }""",
        lambda a: [np.zeros_like(a[0])]),
    "all_reduce_start_done": ("""ENTRY e { p = f32[16] parameter(0)
        s = f32[16] all-reduce-start(p), replica_groups={{0}}, to_apply=add
        ROOT d = f32[16] all-reduce-done(s) }""", lambda a: [a[0]]),
    "all_gather_start_done": ("""ENTRY e { p = f32[4,8] parameter(0)
        s = (f32[4,8], f32[4,8]) all-gather-start(p), replica_groups={{0}}, dimensions={0}
        d = f32[4,8] all-gather-done(s)
        ROOT n = f32[4,8] negate(d) }""", lambda a: [-a[0]]),
    "collective_permute_start_done_both_ways": ("""ENTRY e { p = f32[6] parameter(0)
        s = (f32[6], f32[6]) collective-permute-start(p), source_target_pairs={{0,0}}
        d = f32[6] collective-permute-done(s)
        t2 = (f32[6], f32[6]) collective-permute-start(p), source_target_pairs={{1,0}}
        d2 = f32[6] collective-permute-done(t2)
        ROOT t = (f32[6], f32[6]) tuple(d, d2) }""", lambda a: [a[0], np.zeros_like(a[0])]),
    "copy_start_done": ("""ENTRY e { p = f32[128,32] parameter(0)
        s = (f32[128,32], f32[128,32], u32[]) copy-start(p)
        d = f32[128,32] copy-done(s)
        ROOT a = f32[128,32] add(d, p) }""", lambda a: [2 * a[0]]),
    "copy_start_to_host_memory_and_back": ("""ENTRY e { p = f32[8]{0} parameter(0)
        s = (f32[8]{0:S(5)}, f32[8]{0}, u32[]) copy-start(p)  d = f32[8]{0:S(5)} copy-done(s)
        b = (f32[8]{0}, f32[8]{0:S(5)}, u32[]) copy-start(d)  ROOT r = f32[8]{0} copy-done(b) }""",
        lambda a: [a[0]]),
    "async_start_wrapping_a_reduce_scatter": ("""rs { x = f32[4,2] parameter(0)
          ROOT r = f32[4,2] reduce-scatter(x), replica_groups={{0}}, dimensions={0}, to_apply=add }
        ENTRY e { p = f32[4,2] parameter(0)
          s = ((f32[4,2]), f32[4,2]) async-start(p), calls=rs
          ROOT d = f32[4,2] async-done(s) }""", lambda a: [a[0]]),
    "all_reduce_in_a_while_body": ("""cond { p = (s32[], f32[4]) parameter(0)
          i = s32[] get-tuple-element(p), index=0 c = s32[] constant(3)
          ROOT lt = pred[] compare(i, c), direction=LT }
        body { p = (s32[], f32[4]) parameter(0) i = s32[] get-tuple-element(p), index=0
          one = s32[] constant(1) n = s32[] add(i, one) v = f32[4] get-tuple-element(p), index=1
          r = f32[4] all-reduce(v), replica_groups={{0}}, to_apply=add  w = f32[4] add(r, v)
          ROOT t = (s32[], f32[4]) tuple(n, w) }
        ENTRY e { x = f32[4] parameter(0) z = s32[] constant(0) t = (s32[], f32[4]) tuple(z, x)
          w = (s32[], f32[4]) while(t), condition=cond, body=body
          ROOT o = f32[4] get-tuple-element(w), index=1 }""", lambda a: [8 * a[0]]),
    "all_gather_changing_the_layout_is_a_transposing_copy": ("""ENTRY e { p = f32[4,8]{1,0} parameter(0)
        ROOT g = f32[4,8]{0,1} all-gather(p), replica_groups={{0}}, dimensions={0} }""", lambda a: [a[0]]),
    "empty_group_in_a_module_of_two_partitions_is_cross_replica": ("""ENTRY e { p = f32[4] parameter(0)
        ROOT r = f32[4] all-reduce(p), replica_groups={}, to_apply=add }""", lambda a: [a[0]]),
}
HEADERS = {"empty_group_in_a_module_of_two_partitions_is_cross_replica": ", num_partitions=2"}


def module_text(name: str) -> str:
    return f"HloModule {name}{HEADERS.get(name, '')}\n{ADD}{CASES[name][0]}"


def run_on_host(text: str, args: list[np.ndarray]):
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    result = compile_module(parse_module(text), CompileOptions(target="host"))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    return ManifestExecutable(manifest, HostDevice()).run(args), manifest


@pytest.mark.parametrize("name", list(CASES))
def test_host_pipe_matches_the_interpreter(name):
    text = module_text(name)
    args = entry_arguments(parse_module(text), seed=7)
    got, manifest = run_on_host(text, args)
    reference = flatten_leaves(evaluate(parse_module(text), args))
    by_hand = CASES[name][1](args)
    got = flatten_leaves(got)
    assert len(got) == len(reference) == len(by_hand)
    for g, r, h in zip(got, reference, by_hand):
        np.testing.assert_array_equal(g, r)
        np.testing.assert_array_equal(g, h)
    assert "is not supported" not in manifest.hlo


def thunk_kinds(text: str) -> list[str]:
    result = compile_module(parse_module(text), CompileOptions(target="host"))
    return [t.kind for t in result.manifest.thunks.thunks]


def test_copies_and_memsets_not_kernels():
    assert thunk_kinds(module_text("variadic_all_reduce_no_groups")) == ["kCopy", "kCopy"]
    assert thunk_kinds(module_text("collective_permute_to_another_device_gives_zeros")) == ["kMemzero"]
    # the start copies, the done adds nothing; the negate is the only kernel
    assert thunk_kinds(module_text("all_gather_start_done")) == ["kCopy", "kKernel"]
    assert thunk_kinds(module_text("copy_start_done")) == ["kCopy", "kKernel"]
    assert thunk_kinds(module_text("all_gather_changing_the_layout_is_a_transposing_copy")) == ["kKernel"]


def test_the_manifest_keeps_the_collectives_for_the_reference():
    _, manifest = run_on_host(module_text("collective_permute_start_done_both_ways"),
                              [np.arange(6, dtype=np.float32)])
    assert "collective-permute-start(" in manifest.hlo and "collective-permute-done(" in manifest.hlo


@pytest.mark.parametrize("header, collective, devices", [
    ("", "ROOT r = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add", 2),
    ("", "ROOT r = f32[4] collective-broadcast(p), replica_groups=[1,4]<=[4]", 4),
    ("", "s = f32[4] all-reduce-start(p), replica_groups={{1,0,2}}, to_apply=add\n"
         "ROOT d = f32[4] all-reduce-done(s)", 3),
])
def test_a_group_of_several_devices_is_refused(header, collective, devices):
    text = f"HloModule m{header}\n{ADD}ENTRY e {{ p = f32[4] parameter(0)\n {collective} }}"
    with pytest.raises(HloError, match=rf"^%\w+: [a-z-]+ needs {devices} devices; hlo-codegen compiles "
                                       r"for one \(in computation e\)$"):
        compile_module(parse_module(text), CompileOptions(target="host"))


def test_the_cli_error_is_one_line_without_traceback():
    text = f"HloModule m\n{ADD}ENTRY e {{ p = f32[4] parameter(0)\n" \
           " ROOT g = f32[8] all-gather(p), replica_groups={{0,1}}, dimensions={0} }"
    result = CliRunner().invoke(cli, ["--target", "host"], input=text, catch_exceptions=False)
    assert result.exit_code == 1
    assert "%g: all-gather needs 2 devices; hlo-codegen compiles for one (in computation e)" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_cuda_ptx_links():
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX linking needs nvJitLink (the ptx extra)")
    for name in ("all_gather_changing_the_layout_is_a_transposing_copy", "all_reduce_in_a_while_body",
                 "copy_start_done"):
        result = compile_module(parse_module(module_text(name)), CompileOptions(target="cuda"))
        assert result.manifest.kernels and all(k.ptx for k in result.manifest.kernels.values())
