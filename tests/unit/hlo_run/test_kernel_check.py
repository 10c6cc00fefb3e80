"""hlo_run.kernel_check: a manifest is executable code, so hlo-run checks each kernel's outside
references, signature and launch limits before any kernel is loaded. Every case starts from a
real compiled manifest, edits it as an attacker would, recomputes the sha256 (which anyone can)
and expects one line naming the kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.manifest.kernel_symbols import host_may_declare
from hlo_common.manifest.manifest import body_digest, load_manifest
from hlo_run.kernel_check import KernelCheckError, check_manifest_kernels

SOFTMAX = Path(__file__).parents[3] / "testdata" / "softmax.hlo"
TWO_KERNELS = """HloModule two
lt { x = f32[] parameter(0) y = f32[] parameter(1) ROOT c = pred[] compare(x, y), direction=LT }
ENTRY e { p = f32[64] parameter(0) q = f32[64] parameter(1)
  a = f32[64] add(p, q) s = f32[64] sort(a), dimensions={0}, to_apply=lt
  ROOT n = f32[64] negate(s) }
"""


def _compiled(target: str, text: str | None = None) -> dict:
    from hlo_codegen.compiler import CompileOptions, compile_module

    module = parse_module(text if text is not None else SOFTMAX.read_text(), "m.hlo")
    result = compile_module(module, CompileOptions(target=target))
    return json.loads(result.manifest.to_bytes())


@pytest.fixture(scope="module")
def host_body() -> dict:
    return _compiled("host")


@pytest.fixture(scope="module")
def cuda_body() -> dict:
    return _compiled("cuda")


def _rehash(body: dict) -> bytes:
    body = json.loads(json.dumps(body))
    body["integrity"] = {"sha256": body_digest(body)}
    return json.dumps(body).encode()


def _edited(body: dict, edit) -> dict:
    body = json.loads(json.dumps(body))
    edit(body["kernels"][0])
    return body


def _check(body: dict) -> None:
    check_manifest_kernels(load_manifest(_rehash(body), "m.json"), "m.json")


def _ir_edit(old: str, new: str, count: int = 1):
    def edit(kernel: dict) -> None:
        assert old in kernel["llvm_ir"]
        kernel["llvm_ir"] = kernel["llvm_ir"].replace(old, new, count)
    return edit


def _entry_line(body: dict) -> str:
    k = body["kernels"][0]
    return f"define void @{k['name']}(ptr %args, i64 %block_begin, i64 %block_end) {{\nentry:\n"


def test_compiled_manifests_pass(host_body, cuda_body):
    _check(host_body)
    _check(cuda_body)
    for target in ("host", "cuda"):
        _check(_compiled(target, TWO_KERNELS))


def test_the_host_lowering_declares_only_what_the_runtime_allows(host_body):
    import re

    declared = [n for kernel in host_body["kernels"]
                for n in re.findall(r"^declare [^@]*@([-\w$.]+)\(", kernel["llvm_ir"], re.M)]
    assert declared and all(host_may_declare(n) for n in declared)
    assert not host_may_declare("system") and not host_may_declare("llvm.x86.rdtsc")


SYSTEM = 'declare i32 @system(ptr)\n@cmd = private constant [3 x i8] c"id\\00"\n'


@pytest.mark.parametrize("case, edit, message", [
    ("system", lambda b: _ir_edit(_entry_line(b), SYSTEM + _entry_line(b) + "  %s = call i32 @system(ptr @cmd)\n"),
     r"declares @system; host kernels may call only LLVM intrinsics"),
    ("outside variable", lambda b: _ir_edit(_entry_line(b), "@environ = external global ptr\n" + _entry_line(b)),
     r"declares the outside variable @environ"),
    ("inline asm", lambda b: _ir_edit(_entry_line(b), _entry_line(b) + '  call void asm sideeffect "nop", ""()\n'),
     r"uses inline assembly"),
    ("pointer call", lambda b: _ir_edit(_entry_line(b), _entry_line(b) + "  call void inttoptr (i64 4096 to ptr)()\n"),
     r"calls through a pointer"),
    ("module asm", lambda b: _ir_edit(_entry_line(b), 'module asm ".globl x"\n' + _entry_line(b)),
     r"module-level assembly"),
    ("register intrinsic", lambda b: _ir_edit(_entry_line(b), "declare i64 @llvm.x86.rdtsc()\n" + _entry_line(b)
                                              + "  %r = call i64 @llvm.x86.rdtsc()\n"),
     r"declares @llvm.x86.rdtsc"),
    ("one more argument", lambda b: _ir_edit("ptr %args, i64 1\n", "ptr %args, i64 2\n"),
     r"reads argument 2; the manifest passes 2"),
    ("argument array escapes", lambda b: _ir_edit("getelementptr inbounds ptr, ptr %args, i64 1",
                                                 "getelementptr inbounds i8, ptr %args, i64 1"),
     r"uses its argument array other than by loading pointers"),
    ("wrong signature", lambda b: _ir_edit("i64 %block_begin, i64 %block_end)", "i32 %block_begin, i64 %block_end)"),
     r"the runtime calls void \(ptr, i64, i64\)|invalid LLVM IR"),
])
def test_host_ir_outside_the_lowering_is_refused(host_body, case, edit, message):
    body = _edited(host_body, edit(host_body))
    name = body["kernels"][0]["name"]
    with pytest.raises(KernelCheckError, match=rf"^m.json: kernel {name}: .*({message})"):
        _check(body)


def test_fewer_arguments_than_the_kernel_reads_is_refused(host_body):
    """The case that segfaulted: the metadata says one argument, the kernel reads two."""
    body = json.loads(json.dumps(host_body))
    body["kernels"][0]["num_params"] = 1
    for thunk in body["thunks"]["thunks"]:
        if thunk.get("kernel") == body["kernels"][0]["name"]:
            thunk["args"] = thunk["args"][:1]
    with pytest.raises(KernelCheckError, match=r"reads argument 1; the manifest passes 1"):
        _check(body)


@pytest.mark.parametrize("grid, block, shared, message", [
    ([2 ** 31, 65535, 65535], None, None, r"grid dimension x is 2147483648; the device allows 1 to 2147483647"),
    ([1, 65536, 1], None, None, r"grid dimension y is 65536"),
    ([0, 1, 1], None, None, r"grid dimension x is 0"),
    (None, [2048, 1, 1], None, r"block dimension x is 2048"),
    (None, [64, 64, 1], None, r"4096 threads per block"),
    (None, None, 1 << 30, r"1073741824 bytes of shared memory"),
])
def test_launches_beyond_the_device_limits_are_refused(host_body, grid, block, shared, message):
    def edit(body: dict) -> None:
        kernel = body["kernels"][0]
        for thunk in body["thunks"]["thunks"]:
            if thunk.get("kernel") == kernel["name"]:
                for key, value in (("grid", grid), ("block", block), ("shared_bytes", shared)):
                    if value is not None:
                        thunk[key] = kernel[key] = value

    body = json.loads(json.dumps(host_body))
    edit(body)
    with pytest.raises(KernelCheckError, match=message):
        _check(body)


@pytest.mark.parametrize("edit, message", [
    (lambda ptx, name: ptx.replace(f".visible .entry {name}(",
                                   ".extern .func (.param .b32 r) vprintf(.param .b64 a, .param .b64 b);\n"
                                   f".visible .entry {name}("),
     r"declares the outside function vprintf"),
    (lambda ptx, name: ptx.replace("\tret;", "\tcall.uni __assertfail, ();\n\tret;", 1),
     r"calls __assertfail, which is not a function of the same PTX"),
    (lambda ptx, name: ptx.replace("\tret;", "\tcall.uni %rd1, (), proto;\n\tret;", 1),
     r"calls through a register"),
    (lambda ptx, name: ptx.replace(f"{name}_param_1\n", f"{name}_param_1,\n\t.param .u64 extra\n", 1),
     r"takes 3 parameters; the manifest passes 2"),
    (lambda ptx, name: ptx.replace(f".entry {name}(", ".entry other(", 1), r"has no .entry"),
])
def test_ptx_outside_the_lowering_is_refused(cuda_body, edit, message):
    body = json.loads(json.dumps(cuda_body))
    kernel = body["kernels"][0]
    changed = edit(kernel["ptx"], kernel["name"])
    assert changed != kernel["ptx"]
    kernel["ptx"] = changed
    with pytest.raises(KernelCheckError, match=message):
        _check(body)


def test_hlo_run_refuses_a_manifest_that_calls_system_before_running_anything(host_body, tmp_path: Path):
    marker = tmp_path / "ran"
    command = f"touch {marker}".encode()
    constant = f'@cmd = private constant [{len(command) + 1} x i8] c"{command.decode()}\\00"\n'
    entry = _entry_line(host_body)
    body = _edited(host_body, _ir_edit(entry, "declare i32 @system(ptr)\n" + constant + entry
                                       + "  %s = call i32 @system(ptr @cmd)\n"))
    path = tmp_path / "evil.manifest.json"
    path.write_bytes(_rehash(body))
    proc = subprocess.run([str(Path(sys.executable).parent / "hlo-run"), "--platform", "host", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and not marker.exists()
    assert proc.stderr.splitlines()[-1] == (
        f"hlo-run: error: {path}: kernel {body['kernels'][0]['name']}: its LLVM IR declares @system; host "
        "kernels may call only LLVM intrinsics (hlo_common.manifest.kernel_symbols)")
    assert "Traceback" not in proc.stderr


def test_help_and_readme_say_a_manifest_is_executable_code():
    from click.testing import CliRunner

    from hlo_run.cli import cli

    help_text = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    assert "A manifest is executable code, like a shared library" in help_text
    assert "sha256 guards against corruption, not tampering" in help_text
    readme = " ".join((Path(__file__).parents[3] / "README.md").read_text().split())
    assert "A manifest is executable code**, like a shared library" in readme
