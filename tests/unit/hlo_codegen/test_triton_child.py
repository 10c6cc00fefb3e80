"""The Triton child of hlo-codegen (hlo_codegen.triton_gemm.child, compile.py): one child per
module with Triton GEMM fusions, none for a module without; Triton kernels are kept in the kernel
cache, so that a second compile starts no child and gives the same kernels, and the manifest of a
compile from the cache is byte for byte the one without it; the child compiles while the other
kernels are emitted, and the manifest is the one of waiting for it first, also when Triton
refuses a kernel; the child keeps Triton's key in Triton's cache directory under a name that
changes with Triton's files, and a later child reads it there."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_opt.pipelines import build_gpu_pipeline

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_codegen.triton_gemm import child, compile as tcompile
from hlo_codegen.triton_gemm.source import kernel_source

pytestmark = pytest.mark.skipif(not tcompile.triton_available(),
                                reason="the Triton GEMM emitter needs the .[triton] extra")

TESTDATA = Path(__file__).resolve().parents[3] / "testdata"
CONFIG = {"block_m": 64, "block_n": 64, "block_k": 32, "num_warps": 4, "num_stages": 3}
NEGATE = "HloModule tiny\n\nENTRY main {\n  a = f32[4] parameter(0)\n  ROOT b = f32[4] negate(a)\n}\n"


def _optimized(path: Path):
    module = parse_module(path.read_text(), path.name)
    build_gpu_pipeline().run_with(module, RunOptions())
    return module


def _gemm_source():
    module = _optimized(TESTDATA / "triton" / "matmul_bf16.hlo")
    (fusion,) = [i for i in module.entry.instructions if i.name.startswith("gemm_fusion")]
    return kernel_source(fusion, CONFIG)


def _count_children(monkeypatch) -> list[int]:
    started: list[int] = []
    run = tcompile._run_child

    def counted(requests, children=None):
        started.append(len(requests))
        return run(requests, children)

    monkeypatch.setattr(tcompile, "_run_child", counted)
    return started


def test_cached_triton_kernels_need_no_child(tmp_path, monkeypatch):
    source = _gemm_source()
    (first,) = tcompile.compile_kernels([source], "sm_90", cache_dir=str(tmp_path))
    assert list((tmp_path / "kernels").rglob("*.json"))  # stored
    started = _count_children(monkeypatch)
    (again,) = tcompile.compile_kernels([source], "sm_90", cache_dir=str(tmp_path))
    assert again == first and started == []
    tcompile.compile_kernels([source], "sm_80", cache_dir=str(tmp_path))  # another arch: not that entry
    assert started == [1]


def test_one_child_per_module_with_triton_gemms_and_none_without(monkeypatch):
    started = _count_children(monkeypatch)
    compile_module(parse_module(NEGATE, "tiny"), CompileOptions(target="cuda"))
    assert started == []
    result = compile_module(_optimized(TESTDATA / "transformer_layer.hlo"), CompileOptions(target="cuda"))
    assert started == [3]  # the layer's three distinct GEMM kernels, in one child
    assert sum("triton" in k.to_json() for k in result.manifest.kernels.values()) == 3


def test_a_compile_from_the_cache_writes_the_same_manifest(tmp_path):
    def manifest(cache_dir):
        module = _optimized(TESTDATA / "transformer_layer.hlo")
        return compile_module(module, CompileOptions(target="cuda", cache_dir=cache_dir)).manifest.to_bytes()

    without = manifest(None)
    assert manifest(str(tmp_path)) == without  # filling the cache
    assert manifest(str(tmp_path)) == without  # every kernel from it


def test_the_child_keeps_tritons_key_where_a_later_child_finds_it(tmp_path):
    import triton
    import triton.runtime.cache as cache

    env = {"TRITON_CACHE_DIR": str(tmp_path)}
    run = lambda: subprocess.run(  # noqa: E731
        [child.sys.executable, "-c", "from hlo_codegen.triton_gemm import child; child.warm_up(); "
         "import triton.runtime.cache as c; print(c.triton_key())"],
        capture_output=True, text=True, env={**child.os.environ, **env}, check=True).stdout.strip()
    first = run()
    (kept,) = tmp_path.glob("hlo-toolchain-triton-key-*.txt")
    assert kept.read_text() == first == cache.triton_key()  # Triton's own key, computed in this process
    kept.write_text("a key read from the file")  # a later child reads it instead of hashing again
    assert run() == "a key read from the file"
    fingerprint = child._fingerprint(Path(triton.__file__).parent)
    assert kept.name == f"hlo-toolchain-triton-key-{fingerprint}.txt"


def test_the_fingerprint_follows_tritons_files(tmp_path):
    for part in ("compiler", "backends", "language", "_C"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "a.py").write_text("x = 1\n")
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "cache.py").write_text("y = 2\n")
    before = child._fingerprint(tmp_path)
    (tmp_path / "_C" / "a.py").write_text("x = 10\n")  # another size
    assert child._fingerprint(tmp_path) != before


def _manifest_and_note(monkeypatch, capsys, wait: bool) -> tuple[bytes, str]:
    from hlo_codegen import thunk_emitter

    if wait:  # the order before the child compiled beside emission: Triton's answer first
        emit = thunk_emitter.ThunkEmitter.emit_entry
        monkeypatch.setattr(thunk_emitter.ThunkEmitter, "emit_entry", lambda self, wait_for_triton=False:
                            emit(self, wait_for_triton=True))
    module = _optimized(TESTDATA / "transformer_layer.hlo")
    manifest = compile_module(module, CompileOptions(target="cuda")).manifest.to_bytes()
    monkeypatch.undo()
    return manifest, capsys.readouterr().err


def test_emitting_while_triton_compiles_gives_the_manifest_of_waiting_first(monkeypatch, capsys):
    assert _manifest_and_note(monkeypatch, capsys, False) == _manifest_and_note(monkeypatch, capsys, True)


def test_a_kernel_triton_refuses_after_emission_gives_the_manifest_of_waiting_first(monkeypatch, capsys):
    from hlo_codegen.triton_gemm import emitter

    render = emitter.render

    def refuse_one(program, config, name):  # one of the layer's GEMM kernels only
        text = render(program, config, name)
        return text.replace("tl.dot(", "tl.no_such_dot(") if name == "gemm_fusion_dot_4" else text

    def run(wait):
        monkeypatch.setattr(emitter, "render", refuse_one)
        return _manifest_and_note(monkeypatch, capsys, wait)

    (deferred, note), (waited, note_waited) = run(False), run(True)
    triton_kernels = [k["name"] for k in json.loads(deferred)["kernels"] if "triton" in k]
    assert deferred == waited and triton_kernels and "gemm_fusion_dot_4" not in triton_kernels
    assert note == note_waited and note.count("Triton could not compile gemm_fusion_dot_4") == 1


def test_an_emission_error_stops_the_compiling_child(monkeypatch):
    from hlo_codegen import kernel_backend
    from hlo_common.errors import HloError

    children = []
    run = tcompile._run_child
    monkeypatch.setattr(tcompile, "_run_child", lambda requests, started=None: run(requests, children))

    def refuse(fusion, device):
        raise HloError("the loop emitter refuses")

    monkeypatch.setattr(kernel_backend, "fusion_emitter", refuse)
    with pytest.raises(HloError, match="the loop emitter refuses"):
        compile_module(_optimized(TESTDATA / "transformer_layer.hlo"), CompileOptions(target="cuda"))
    assert len(children) == 1 and children[0].returncode is not None  # ended and waited for
