"""hlo-codegen's command line: output, dumps with XLA's names, exit codes and one-line errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from codegen_testlib import FakeKernelBackend

from hlo_common.manifest.manifest import load_manifest
from hlo_codegen import compiler
from hlo_codegen.cli import cli
from hlo_codegen.kernel_backend import KernelEmissionError

GEMM = """HloModule jit_f
ENTRY e { a = f32[2,3] parameter(0) b = f32[3,4] parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} }"""
ADD = """HloModule jit_g
ENTRY e { p = f32[8] parameter(0) n = f32[8] negate(p) ROOT a = f32[8] add(n, p) }"""


def run(args, stdin=None):
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)


@pytest.fixture
def fake_kernels(monkeypatch):
    backend = FakeKernelBackend()
    monkeypatch.setattr(compiler, "default_backend", lambda options: backend)
    return backend


def test_stdin_to_stdout_and_file_output(tmp_path):
    result = run(["--target", "host"], stdin=GEMM)
    assert result.exit_code == 0, result.stderr
    manifest = load_manifest(result.stdout_bytes, "stdout")
    assert manifest.module_name == "jit_f" and manifest.target == "host"
    out = tmp_path / "m.json"
    result = run(["--target", "cuda", "--arch", "sm_90", "-o", str(out)], stdin=GEMM)
    assert result.exit_code == 0 and result.stdout == ""
    manifest = load_manifest(out.read_bytes(), str(out))
    assert (manifest.target, manifest.arch) == ("cuda", "sm_90")


def test_dumps_use_xla_names(tmp_path, fake_kernels):
    src = tmp_path / "m.hlo"
    src.write_text(ADD)
    dump = tmp_path / "dump"
    result = run(["--target", "cuda", "--dump-to", str(dump), "-o", str(tmp_path / "m.json"), str(src)])
    assert result.exit_code == 0, result.stderr
    names = sorted(p.name for p in dump.iterdir())
    assert names == [
        # the prepare pipeline, with hlo-opt's pass-dump names: its start, then each pass that changed it
        "module_0000.jit_g.0000.codegen-prepare.after_pipeline-start.before_xla-builder-calls.txt",
        "module_0000.jit_g.0001.codegen-prepare.after_fusion-wrapper.before_codegen-copy-insertion.txt",
        "module_0000.jit_g.sm_9.0a_gpu_after_optimizations-buffer-assignment.txt",
        "module_0000.jit_g.sm_9.0a_gpu_after_optimizations.txt",
        "module_0000.jit_g.thunk_sequence.txt",
        "module_0000.jit_g.wrapped_add.kernel_ir.txt",
        "module_0000.jit_g.wrapped_negate.kernel_ir.txt",
    ]
    assert "fusion" not in (dump / names[0]).read_text()
    assert "wrapped_negate = f32[8]{0} fusion(" in (dump / names[1]).read_text()
    ba = (dump / names[2]).read_text()
    assert ba.startswith("BufferAssignment:\nallocation 0: size 32")
    seq = (dump / "module_0000.jit_g.thunk_sequence.txt").read_text().splitlines()
    assert [line.split("\t")[0] for line in seq] == ["001: kKernel", "002: kKernel"]
    hlo = (dump / names[3]).read_text()
    assert "wrapped_negate = f32[8]{0} fusion(" in hlo


def test_host_dump_prefix(tmp_path):
    dump = tmp_path / "d"
    assert run(["--target", "host", "--dump-to", str(dump)], stdin=GEMM).exit_code == 0
    assert (dump / "module_0000.jit_f.cpu_after_optimizations-buffer-assignment.txt").is_file()


def test_parse_error_is_one_line_with_location(tmp_path):
    text = "HloModule m\nENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negat(p) }"
    result = run(["--target", "host"], stdin=text)
    assert result.exit_code == 1
    assert result.stderr.startswith("hlo-codegen: error: <stdin>:2:")
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_unsupported_instruction_and_missing_input():
    text = "HloModule m\nENTRY e { a = token[] after-all() ROOT i = (f32[4], token[]) infeed(a) }"
    result = run(["--target", "host"], stdin=text)
    assert result.exit_code == 1 and "%i: infeed is not supported by hlo-codegen" in result.stderr
    result = run(["no/such/file.hlo"])
    assert result.exit_code == 1 and "cannot read 'no/such/file.hlo': no such file" in result.stderr


def test_kernel_failure_names_the_kernel_and_fusion(monkeypatch, tmp_path):
    class Failing:
        def compile(self, fusion, args, unique_name):
            name = unique_name(fusion.name)
            raise KernelEmissionError(f"kernel {name} (fusion %{fusion.name}): nvJitLink sm_90 failed: "
                                      "bad ptx")

    monkeypatch.setattr(compiler, "default_backend", lambda options: Failing())
    out = tmp_path / "m.json"
    result = run(["--target", "cuda", "-o", str(out)], stdin=ADD)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines == ["hlo-codegen: error: kernel wrapped_negate (fusion %wrapped_negate): nvJitLink sm_90 "
                     "failed: bad ptx"]
    assert not out.exists()


def test_output_into_a_missing_directory_writes_nothing(tmp_path):
    result = run(["--target", "host", "-o", str(tmp_path / "nope" / "m.json")], stdin=GEMM)
    assert result.exit_code == 1 and "no such directory" in result.stderr
    assert not (tmp_path / "nope").exists()


def test_usage_errors_exit_2():
    assert run(["--target", "tpu"], stdin=GEMM).exit_code == 2
    assert run(["--frobnicate"], stdin=GEMM).exit_code == 2


def test_manifest_holds_the_compiled_module(fake_kernels):
    result = run(["--target", "host"], stdin=ADD)
    body = json.loads(result.stdout)
    assert "wrapped_add_computation" in body["hlo"] and body["module_name"] == "jit_g"
    assert [k["name"] for k in body["kernels"]] == ["wrapped_add", "wrapped_negate"]
