"""hlo-run --find-first-mismatch on planted miscompiles: one op of one kernel's LLVM IR is flipped in
the manifest (the kernel is found by the op it contains, whatever fusions hlo-opt formed), and the
bisector must name that kernel, the execution (loop iteration) where it first goes wrong, its dumps,
and write a standalone module whose inputs reproduce the kernel's expected value."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_run.cli import cli
from hlo_run.compile_hook import compile_to_manifest

CHAIN = """HloModule chain
ENTRY e {
  p = f32[8,16] parameter(0)
  q = f32[8,16] parameter(1)
  a = f32[8,16] add(p, q)
  x = f32[8,16] exponential(a)
  m = f32[8,16] multiply(x, q)
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(m, z), dimensions={1},
    to_apply={ u = f32[] parameter(0) v = f32[] parameter(1) ROOT s = f32[] add(u, v) }
}
"""
LOOP = """HloModule loop
cond {
  p = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(6)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[16] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  three = s32[] constant(3)
  big = pred[] compare(i, three), direction=GT
  bb = pred[16] broadcast(big), dimensions={}
  two = f32[] constant(2)
  t = f32[16] broadcast(two), dimensions={}
  y = f32[16] multiply(x, t)
  w = f32[16] add(x, t)
  s = f32[16] select(bb, y, w)
  ROOT r = (s32[], f32[16]) tuple(j, s)
}
ENTRY e {
  a = f32[16] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[16]) tuple(z, a)
  w = (s32[], f32[16]) while(t), condition=cond, body=body
  ROOT x = f32[16] get-tuple-element(w), index=1
}
"""


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --mismatch-dir is ./hlo_run_mismatch


def plant(manifest, old: str, new: str) -> str:
    """Flip the first `old` into `new` in the one kernel whose LLVM IR holds `old`; its name."""
    holders = [name for name, k in sorted(manifest.kernels.items()) if old in (k.llvm_ir or "")]
    assert len(holders) == 1, holders
    kernel = manifest.kernels[holders[0]]
    manifest.kernels[holders[0]] = dataclasses.replace(kernel, llvm_ir=kernel.llvm_ir.replace(old, new, 1))
    return holders[0]


@pytest.fixture(scope="module")
def chain_build(tmp_path_factory):
    d = tmp_path_factory.mktemp("chain")
    manifest = compile_to_manifest(CHAIN, "chain.hlo", "host", optimize=True, dump_to=str(d / "dumps"))
    return d, manifest


def test_names_the_planted_kernel_with_dumps_and_a_standalone_module(chain_build, tmp_path):
    d, manifest = chain_build
    manifest = load_manifest(manifest.to_bytes(), "copy")
    planted = plant(manifest, "fmul float", "fadd float")
    bad = tmp_path / "bad.json"
    bad.write_bytes(manifest.to_bytes())
    out_dir = tmp_path / "mismatch"
    result = run(["--platform=cpu", "--find-first-mismatch", "--dump-to", str(d / "dumps"),
                  "--mismatch-dir", str(out_dir), str(bad)])
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    first = result.stdout.splitlines()[0]
    pattern = rf"First mismatch: thunk \d{{3}} kKernel \S+ \(kernel {planted}\), instruction %\S+"
    assert re.match(pattern, first), first
    assert result.stderr.strip().splitlines()[-1].startswith("hlo-run: error: ")
    assert f"(kernel {planted}), execution 1" in result.stderr
    assert "multiply(" in result.stdout  # the fusion's HLO is shown
    assert f"module_0000.chain.{planted}.kernel_ir.txt" in result.stdout
    assert f"module_0000.chain.{planted}.ll" in result.stdout
    # the standalone module reproduces the kernel: the interpreter on its saved inputs gives the value
    # of that instruction in the full run
    (hlo_file,) = out_dir.glob("*.hlo")
    (npz_file,) = out_dir.glob("*.inputs.npz")
    assert f"hlo-run {hlo_file} --platform host --inputs {npz_file} --no-hlo-passes" in result.stdout
    standalone = parse_module(hlo_file.read_text())
    assert standalone.is_scheduled
    with np.load(npz_file) as data:
        inputs = [data[f"arg{i}"] for i in range(len(data.files))]
    got = evaluate(standalone, inputs)
    name = standalone.entry.root.name
    full = parse_module(manifest.hlo)
    from hlo_common.hlo.hlo_utils import global_computations
    from hlo_run.bisect import TracingEvaluator

    (instr,) = [i for c in global_computations(full) for i in c.instructions if i.name == name]
    from hlo_run.inputs import make_fake_arguments

    tracer = TracingEvaluator([instr])
    tracer.evaluate(full, make_fake_arguments(parse_module(CHAIN), 0))
    # the inputs are what the host kernels before it produced: the interpreter's values up to rounding
    np.testing.assert_allclose(got, tracer.trace[id(instr)][0], rtol=1e-5, atol=1e-6)
    assert "its inputs (the operand values this thunk was given)" in result.stdout
    assert "against the interpreter on the operands this thunk was given (so not inherited):" in result.stdout


def test_a_correct_manifest_and_hlo_text_match_thunk_by_thunk(chain_build, tmp_path):
    d, manifest = chain_build
    good = tmp_path / "good.json"
    good.write_bytes(manifest.to_bytes())
    result = run(["--platform", "host", "--find-first-mismatch", str(good)])
    assert result.exit_code == 0, result.stderr
    assert re.search(r"All [1-9]\d* thunk output\(s\) compared match the interpreter", result.stdout)
    src = tmp_path / "chain.hlo"
    src.write_text(CHAIN)
    result = run(["--platform", "host", "--find-first-mismatch", str(src)])
    assert result.exit_code == 0 and "match, thunk by thunk" in result.stdout


def test_loop_bodies_compare_per_iteration(tmp_path):
    manifest = compile_to_manifest(LOOP, "loop.hlo", "host", optimize=False)
    planted = plant(manifest, "icmp sgt", "icmp sge")  # i > 3 becomes i >= 3: wrong from iteration 3 on
    bad = tmp_path / "loop.json"
    bad.write_bytes(manifest.to_bytes())
    result = run(["--platform", "host", "--find-first-mismatch", "--mismatch-dir", str(tmp_path / "m"),
                  str(bad)])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"(kernel {planted})" in lines[0] and "in computation body" in lines[0]
    assert lines[1] == ("  execution 4 (inside while %w: iteration 3, counting from 0, when it runs once "
                        "per iteration)")
    with np.load(next((tmp_path / "m").glob("*.npz"))) as data:
        assert int(data["arg0"]) == 3  # the loop counter the kernel was given in that iteration


def test_passes_that_change_the_result_are_blamed_not_the_kernels(tmp_path, monkeypatch):
    import hlo_run.compile_hook as hook

    real = hook.compile_to_manifest
    src = tmp_path / "chain.hlo"
    src.write_text(CHAIN)
    # a stand-in for a wrong hlo-opt: the "optimized" module computes p - q where the input adds
    monkeypatch.setattr(hook, "compile_to_manifest", lambda text, name, target, **kw: real(
        text.replace("add(p, q)", "subtract(p, q)"), name, target, optimize=False))
    result = run(["--platform", "host", "--find-first-mismatch", "--mismatch-dir", str(tmp_path / "m"),
                  str(src)])
    assert result.exit_code == 1
    assert "The kernels are right.\nhlo-opt's passes changed the result." in result.stdout
    assert "the optimized module differs from the input on the interpreter" in result.stderr


def test_interpreter_platform_is_a_usage_error(tmp_path):
    src = tmp_path / "chain.hlo"
    src.write_text(CHAIN)
    assert run(["--platform", "interpreter", "--find-first-mismatch", str(src)]).exit_code == 2


PLANTED_PASS = '''
import os
if os.environ.get("HLO_TEST_PLANT_PASS") == "1":
    from hlo_opt.passes.reshape_mover import ReshapeMover

    _real = ReshapeMover.run
    _done = []

    def run(self, module):
        changed = _real(self, module)
        for instr in module.entry.instructions:
            if not _done and instr.opcode == "add" and instr.shape.is_array:
                instr.opcode = "subtract"  # a planted miscompile: a + b becomes a - b
                _done.append(instr.name)
                return True
        return changed

    ReshapeMover.run = run
'''


def test_a_pass_that_changes_the_result_is_named(tmp_path, monkeypatch):
    import os

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(PLANTED_PASS)  # hlo-opt runs in a subprocess: plant it there
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HLO_TEST_PLANT_PASS", "1")
    src = tmp_path / "chain.hlo"
    src.write_text(CHAIN)
    result = run(["--platform", "host", "--find-first-mismatch", "--mismatch-dir", str(tmp_path / "m"),
                  str(src)])
    assert result.exit_code == 1, result.stderr
    assert "The pass that changes the result: reshape-mover (pipeline " in result.stdout
    assert "hlo-opt pass 'reshape-mover' changes the result" in result.stderr
    after = [line for line in result.stdout.splitlines() if line.startswith("  after it:")][0].split()[-1]
    assert "after_reshape-mover" in after and "subtract(" in open(after).read()


def test_the_pass_bisection_keeps_what_is_in_the_dump_folder_already(tmp_path, monkeypatch):
    # it used to delete <mismatch dir>/passes recursively and write hlo-opt's output to /dev/null
    # by path (which, run as root, replaced the system's /dev/null with a regular file)
    import os

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(PLANTED_PASS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HLO_TEST_PLANT_PASS", "1")
    kept = tmp_path / "m" / "passes" / "mine.txt"
    kept.parent.mkdir(parents=True)
    kept.write_text("a user's file")
    src = tmp_path / "chain.hlo"
    src.write_text(CHAIN)
    result = run(["--platform", "host", "--find-first-mismatch", "--mismatch-dir", str(tmp_path / "m"),
                  str(src)])
    assert result.exit_code == 1, result.stderr
    assert kept.read_text() == "a user's file"
    after = [line for line in result.stdout.splitlines() if line.startswith("  after it:")][0].split()[-1]
    assert Path(after).parent == tmp_path / "m" / "passes.1"
    assert (tmp_path / "m" / "passes.1" / "optimized.hlo").is_file()


def test_elided_constants_are_named_as_the_likely_cause(tmp_path, monkeypatch):
    import hlo_run.compile_hook as hook

    real = hook.compile_to_manifest
    src = tmp_path / "elided.hlo"
    src.write_text(ELIDED)
    # a pass that renames the constant changes its stand-in values, so the results differ
    monkeypatch.setattr(hook, "compile_to_manifest", lambda text, name, target, **kw: real(
        text.replace("big = ", "big.renamed = ").replace("(p, big)", "(p, big.renamed)"), name, target,
        optimize=False))
    result = run(["--platform", "host", "--find-first-mismatch", "--mismatch-dir", str(tmp_path / "m"),
                  str(src)])
    assert result.exit_code == 1
    assert "1 constant(s) printed as {...}" in result.stderr  # the warning at load
    assert "The input has 1 constant(s) printed as {...}" in result.stdout
    assert "which 1 elided {...} constant(s) can explain" in result.stderr
    assert "hlo-opt's passes changed the result" not in result.stdout


ELIDED = """HloModule elided
ENTRY e {
  p = f32[64] parameter(0)
  big = f32[64] constant({...})
  ROOT a = f32[64] add(p, big)
}
"""


def test_kernels_downstream_of_the_bug_are_not_blamed(chain_build, tmp_path):
    d, manifest = chain_build
    manifest = load_manifest(manifest.to_bytes(), "copy")
    holders = [n for n, k in sorted(manifest.kernels.items()) if "fadd float" in (k.llvm_ir or "")]
    # the first kernel to add (p + q) goes wrong; everything after it sees wrong inputs but is right
    first = next(t.kernel for t in manifest.thunks.thunks if getattr(t, "kernel", None) in holders)
    kernel = manifest.kernels[first]
    manifest.kernels[first] = dataclasses.replace(kernel, llvm_ir=kernel.llvm_ir.replace(
        "fadd float", "fsub float", 1))
    bad = tmp_path / "bad.json"
    bad.write_bytes(manifest.to_bytes())
    result = run(["--platform", "host", "--find-first-mismatch", "--mismatch-dir", str(tmp_path / "m"),
                  str(bad)])
    assert result.exit_code == 1
    assert f"(kernel {first})" in result.stdout.splitlines()[0]
    assert "Later thunks also wrong" not in result.stdout and "Smaller differences" not in result.stdout


MASKED = """HloModule masked
ENTRY e {
  p = f32[16] parameter(0)
  q = f32[16] parameter(1)
  a = f32[16] add(p, q)
  z = f32[] constant(0)
  zb = f32[16] broadcast(z), dimensions={}
  m = f32[16] multiply(a, zb)
  ROOT r = f32[16] subtract(q, m)
}
"""


def test_a_difference_the_final_results_do_not_show_is_listed_and_passes(tmp_path):
    manifest = compile_to_manifest(MASKED, "masked.hlo", "host", optimize=False)
    planted = plant(manifest, "fadd float", "fsub float")
    bad = tmp_path / "masked.json"
    bad.write_bytes(manifest.to_bytes())
    result = run(["--platform", "host", "--find-first-mismatch", str(bad)])
    assert result.exit_code == 0, result.stderr
    assert "The final results match the interpreter, but 1 thunk output(s) differ" in result.stdout
    assert re.search(rf"thunk \d{{3}} kKernel \S+ \(kernel {planted}\), execution 1: [\d.e+]+x the bounds",
                     result.stdout)


# A multi-output fusion whose outputs 0 and 2 reuse the buffers of its operands 0 and 1 (they die
# there): the kernel gets one parameter per distinct slice, so those outputs are passed as the
# operands, under the operands' shape, and only output 1 (reshaped) as a parameter of its own. A
# Llama block's backward (nnx_llama_bf16_grad of testdata/models) has such a fusion.
IN_PLACE_OUTPUTS = """HloModule in_place_outputs, is_scheduled=true
fused_exp {
  p = f32[64,128]{1,0} parameter(0)
  ROOT e = f32[64,128]{1,0} exponential(p)
}
fused_three {
  p0 = f32[64,128]{1,0} parameter(0)
  p1 = f32[64,128]{1,0} parameter(1)
  p2 = f32[64,128]{1,0} parameter(2)
  a = f32[64,128]{1,0} negate(p0)
  ab = f32[2,32,128]{2,1,0} bitcast(a)
  m = f32[64,128]{1,0} multiply(p1, p2)
  mb = f32[2,32,128]{2,1,0} bitcast(m)
  s = f32[64,128]{1,0} subtract(p1, p2)
  sb = f32[2,32,128]{2,1,0} bitcast(s)
  ROOT t = (f32[2,32,128]{2,1,0}, f32[2,32,128]{2,1,0}, f32[2,32,128]{2,1,0}) tuple(ab, mb, sb)
}
ENTRY e {
  x = f32[64,128]{1,0} parameter(0)
  y = f32[64,128]{1,0} parameter(1)
  z = f32[64,128]{1,0} parameter(2)
  ex = f32[64,128]{1,0} fusion(x), kind=kLoop, calls=fused_exp
  ey = f32[64,128]{1,0} fusion(y), kind=kLoop, calls=fused_exp
  f = (f32[2,32,128]{2,1,0}, f32[2,32,128]{2,1,0}, f32[2,32,128]{2,1,0}) fusion(ex, ey, z), kind=kLoop,
    calls=fused_three
  f0 = f32[2,32,128]{2,1,0} get-tuple-element(f), index=0
  f1 = f32[2,32,128]{2,1,0} get-tuple-element(f), index=1
  f2 = f32[2,32,128]{2,1,0} get-tuple-element(f), index=2
  ROOT r = (f32[2,32,128]{2,1,0}, f32[2,32,128]{2,1,0}, f32[2,32,128]{2,1,0}) tuple(f0, f1, f2)
}
"""


def test_outputs_in_their_operands_buffers_are_read_where_they_are(tmp_path):
    manifest = compile_to_manifest(IN_PLACE_OUTPUTS, "in_place.hlo", "host", optimize=False)
    (fused,) = [t for t in manifest.thunks.thunks if getattr(t, "kernel", None) == "f"]
    assert [a.outputs for a in fused.args if a.written] == [((0,),), ((2,),), ((1,),)]  # shared as described
    good = tmp_path / "in_place.json"
    good.write_bytes(manifest.to_bytes())
    result = run(["--platform", "host", "--find-first-mismatch", str(good)])
    # The bisector paired output 0 with the only argument of its shape (output 1's buffer) and
    # reported a correct kernel as 2000x off on its own inputs.
    assert result.exit_code == 0, result.stderr
    assert "All 3 thunk output(s) compared match the interpreter" in result.stdout, result.stdout


# 3p, then (m - 3p) * 1e6: a rounding difference of m within the bounds grows past them in r.
DRIFT = """HloModule drift, is_scheduled=true
fused_scale {
  p = f32[16]{0} parameter(0)
  c = f32[] constant(3)
  cb = f32[16]{0} broadcast(c), dimensions={}
  ROOT m = f32[16]{0} multiply(p, cb)
}
fused_amplify {
  m = f32[16]{0} parameter(0)
  p = f32[16]{0} parameter(1)
  c = f32[] constant(3)
  cb = f32[16]{0} broadcast(c), dimensions={}
  pc = f32[16]{0} multiply(p, cb)
  d = f32[16]{0} subtract(m, pc)
  k = f32[] constant(1e+06)
  kb = f32[16]{0} broadcast(k), dimensions={}
  ROOT r = f32[16]{0} multiply(d, kb)
}
ENTRY e {
  p = f32[16]{0} parameter(0)
  m = f32[16]{0} fusion(p), kind=kLoop, calls=fused_scale
  ROOT r = f32[16]{0} fusion(m, p), kind=kLoop, calls=fused_amplify
}
"""


def test_final_differences_grown_from_rounding_are_called_drift(tmp_path):
    manifest = compile_to_manifest(DRIFT, "drift.hlo", "host", optimize=False)
    kernel = manifest.kernels["m"]  # 3.0 -> 3 + 2^-16: m is off by 5e-6, within the bounds
    manifest.kernels["m"] = dataclasses.replace(
        kernel, llvm_ir=kernel.llvm_ir.replace("0x4008000000000000", "0x4008000800000000"))
    path = tmp_path / "drift.json"
    path.write_bytes(manifest.to_bytes())
    result = run(["--platform", "host", "--find-first-mismatch", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "1 off the interpreter's run only because their inputs were" in result.stdout
    # A Llama block's bf16 backward ends so: it was blamed on "an output no thunk writes?".
    assert "an output no thunk writes" not in result.stdout
    assert "rounding differences the thunks above carried within the bounds grew past them" in result.stdout
    assert result.stderr.strip().endswith("every thunk is right on its inputs: rounding drift")


def test_severity_counts_times_over_the_bounds():
    from hlo_run.bisect import Group, Mismatch
    from hlo_run.compare import compare_arrays

    leaf = compare_arrays("out", np.float32([1.0, 2.0]), np.float32([1.0, 2.01]), 1e-3, 1e-3)
    m = Mismatch(Group(None, [], []), "001", 0, [leaf], 0)
    assert m.severity == pytest.approx(min(0.01 / 1e-3, (0.01 / 2.01) / 1e-3), rel=1e-3)
    exact = compare_arrays("out", np.int32([1]), np.int32([2]), None, None)
    assert Mismatch(Group(None, [], []), "001", 0, [exact], 0).severity == float("inf")
