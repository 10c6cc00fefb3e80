"""hlo-codegen's kernel cache (`hlo_codegen.kernel_cache`): hits and misses, what invalidates an
entry, damaged entries, concurrent writers, byte-identical output, and where it lives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlo_codegen import compiler, kernel_cache
from hlo_codegen.cli import cli
from hlo_codegen.compiler import CompileOptions, compile_module, default_backend
from hlo_codegen.kernel_cache import CachingBackend, KernelCache, default_cache_dir
from hlo_codegen.thunk_emitter import CompiledKernel
from hlo_common.gpu.device import H100
from hlo_common.hlo.parser import parse_module
from hlo_common.manifest.manifest import ManifestKernel

# exp (a libdevice call on cuda) then a row reduction (a shared-memory symbol named after it)
MODULE = """HloModule cache_test

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused_exp (p: f32[64,256]) -> f32[64,256] {
  %p = f32[64,256]{1,0} parameter(0)
  ROOT %e = f32[64,256]{1,0} exponential(%p)
}

%fused_sum (q: f32[64,256]) -> f32[64] {
  %q = f32[64,256]{1,0} parameter(0)
  %zero = f32[] constant(0)
  ROOT %r = f32[64]{0} reduce(%q, %zero), dimensions={1}, to_apply=%add
}

ENTRY %main (x: f32[64,256]) -> f32[64] {
  %x = f32[64,256]{1,0} parameter(0)
  %fusion = f32[64,256]{1,0} fusion(%x), kind=kLoop, calls=%fused_exp
  ROOT %fusion.1 = f32[64]{0} fusion(%fusion), kind=kInput, calls=%fused_sum
}
"""

# MODULE's two fusions behind a third that takes the kernel name `loop_exponential_fusion` first,
# with the entry parameter renamed: both fusions of MODULE hit.
OTHER_FIRST = MODULE[:MODULE.index("ENTRY")] + """%fused_exp.2 (p.2: f32[32]) -> f32[32] {
  %p.2 = f32[32]{0} parameter(0)
  ROOT %e.2 = f32[32]{0} exponential(%p.2)
}

ENTRY %main (y: f32[32], input: f32[64,256]) -> (f32[32], f32[64]) {
  %y = f32[32]{0} parameter(0)
  %fusion.2 = f32[32]{0} fusion(%y), kind=kLoop, calls=%fused_exp.2
  %input = f32[64,256]{1,0} parameter(1)
  %fusion = f32[64,256]{1,0} fusion(%input), kind=kLoop, calls=%fused_exp
  %fusion.1 = f32[64]{0} fusion(%fusion), kind=kInput, calls=%fused_sum
  ROOT %t = (f32[32], f32[64]) tuple(%fusion.2, %fusion.1)
}
"""


def compile_with(text: str, target: str, cache_dir=None, arch: str = "sm_90"):
    """(manifest bytes, backend, result) of compiling `text`, with the cache at `cache_dir`."""
    options = CompileOptions(target=target, arch=arch, cache_dir=str(cache_dir) if cache_dir else None)
    backend = default_backend(options)
    result = compile_module(parse_module(text), options, backend)
    return result.manifest.to_bytes(), backend, result


def counts(backend) -> tuple[int, int]:
    return backend.hits, backend.misses


@pytest.mark.parametrize("target", ["cuda", "host"])
def test_a_second_compile_takes_every_kernel_from_the_cache_byte_for_byte(tmp_path, target):
    plain, _, plain_result = compile_with(MODULE, target)
    cold, backend, _ = compile_with(MODULE, target, tmp_path)
    assert counts(backend) == (0, 2) and backend.stored == 2
    warm, backend, warm_result = compile_with(MODULE, target, tmp_path)
    assert counts(backend) == (2, 0)
    assert cold == plain and warm == plain
    # the dump artifacts (kernel IR, .ll, .ptx) too
    assert {k: v.artifacts for k, v in warm_result.kernels.items()} == \
        {k: v.artifacts for k, v in plain_result.kernels.items()}


def test_the_same_fusion_under_another_kernel_name_is_a_hit(tmp_path):
    compile_with(MODULE, "cuda", tmp_path)
    plain, _, _ = compile_with(OTHER_FIRST, "cuda")
    assert b'"name": "loop_exponential_fusion_1"' in plain  # the scenario: MODULE's kernel renamed
    cached, backend, _ = compile_with(OTHER_FIRST, "cuda", tmp_path)
    assert counts(backend) == (2, 1)
    assert cached == plain


def test_target_arch_device_and_code_version_are_in_the_key(tmp_path, monkeypatch):
    compile_with(MODULE, "cuda", tmp_path)
    for target, arch in (("host", "sm_90"), ("cuda", "sm_80")):  # sm_80 is also another device
        plain, _, _ = compile_with(MODULE, target, arch=arch)
        cached, backend, _ = compile_with(MODULE, target, tmp_path, arch=arch)
        assert counts(backend) == (0, 2) and cached == plain
    monkeypatch.setattr(kernel_cache, "_CODE_VERSION", {"source": "an edited hlo_codegen"})
    _, backend, _ = compile_with(MODULE, "cuda", tmp_path)
    assert counts(backend) == (0, 2)
    monkeypatch.setattr(kernel_cache, "_CODE_VERSION", {})
    _, backend, _ = compile_with(MODULE, "cuda", tmp_path)
    assert counts(backend) == (2, 0)  # each version keeps its entries


def test_a_name_inside_the_fusion_is_in_the_key(tmp_path):
    # the PTX names the reduction's shared memory after %r: another name is another kernel text
    compile_with(MODULE, "cuda", tmp_path)
    renamed = MODULE.replace("%r ", "%row_sum ")
    plain, _, _ = compile_with(renamed, "cuda")
    cached, backend, _ = compile_with(renamed, "cuda", tmp_path)
    assert counts(backend) == (1, 1) and cached == plain
    assert b"row_sum" in plain


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "checksum", "other key", "shape"])
def test_a_damaged_entry_is_ignored_and_rewritten(tmp_path, damage):
    plain, _, _ = compile_with(MODULE, "host", tmp_path)
    entries = sorted((tmp_path / "kernels").rglob("*.json"))
    assert len(entries) == 2
    for path in entries:
        raw = path.read_bytes()
        data = json.loads(raw)
        if damage == "garbage":
            raw = b"\x00\xffnot json"
        elif damage == "truncated":
            raw = raw[: len(raw) // 2]
        elif damage == "empty":
            raw = b""
        elif damage == "checksum":
            data["payload"]["kernels"][0]["grid"] = [7, 7, 7]
            raw = json.dumps(data).encode()
        elif damage == "shape":  # a checksum that holds over a payload missing its fields
            del data["payload"]["kernels"][0]["texts"]
            data["checksum"] = kernel_cache._checksum(data["payload"])
            raw = json.dumps(data).encode()
        else:
            data["key"] = "0" * 64
            raw = json.dumps(data).encode()
        path.write_bytes(raw)
    again, backend, _ = compile_with(MODULE, "host", tmp_path)
    assert counts(backend) == (0, 2) and again == plain
    cache = KernelCache(tmp_path)
    assert all(cache.load(p.stem) is not None for p in entries)  # rewritten whole


def test_the_cli_reads_the_cache_and_no_cache_leaves_it_alone(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)
    cache = tmp_path / "cache"

    def run(*args):
        result = CliRunner().invoke(cli, ["--target", "cuda", *args, str(src)], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        return result.stdout_bytes

    cold = run("--cache-dir", str(cache))
    entry = next((cache / "kernels").rglob("*.json"))
    data = json.loads(entry.read_bytes())
    data["payload"]["kernels"][0]["texts"]["ptx"] = "// from the cache\n" + \
        data["payload"]["kernels"][0]["texts"]["ptx"]
    data["checksum"] = kernel_cache._checksum(data["payload"])
    entry.write_text(json.dumps(data))
    assert b"// from the cache" in run("--cache-dir", str(cache))  # the entry was used
    assert run("--no-cache") == cold
    no_cache_dir = tmp_path / "unused"
    run("--no-cache", "--cache-dir", str(no_cache_dir))
    assert not no_cache_dir.exists()


def test_dumps_are_the_same_with_the_cache(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)

    def dump(name, *args):
        d = tmp_path / name
        args = ["--target", "cuda", "--dump-to", str(d), "-o", str(tmp_path / "o.json"), *args, str(src)]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        return {p.name: p.read_bytes() for p in sorted(d.iterdir())}

    plain = dump("plain", "--no-cache")
    dump("cold", "--cache-dir", str(tmp_path / "cache"))
    assert dump("warm", "--cache-dir", str(tmp_path / "cache")) == plain
    assert any(name.endswith(".ptx") for name in plain)


def _codegen(args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "hlo_codegen.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def test_two_processes_compiling_into_one_cache(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)
    plain, _, _ = compile_with(MODULE, "cuda")
    cache = tmp_path / "cache"
    for _ in range(2):  # both cold, then both warm
        procs = [_codegen(["--target", "cuda", "--cache-dir", str(cache), str(src)]) for _ in range(2)]
        outs = [p.communicate() for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
        assert [out for out, _ in outs] == [plain, plain]
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert len(files) == 2 and all(p.suffix == ".json" for p in files)  # no temporary file left
    assert all(KernelCache(cache).load(p.stem) is not None for p in files)


WRITER = """
import sys
from hlo_codegen.kernel_cache import KernelCache
cache, key, tag = KernelCache(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(300):
    cache.store(key, {"format": 1, "kernels": [], "writer": tag, "padding": tag * 20000})
"""


def test_readers_never_see_half_an_entry_while_two_processes_write_it(tmp_path):
    key = "ab" * 32
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), key, tag]) for tag in "xy"]
    cache = KernelCache(tmp_path)
    seen = set()
    while any(w.poll() is None for w in writers):
        payload = cache.load(key)
        if payload is not None:
            seen.add(payload["writer"])
        elif cache.path(key).exists():
            # a file that is there must parse whole (rename is atomic); checksum failures too would show
            data = json.loads(cache.path(key).read_bytes())
            assert data["key"] == key
    assert [w.wait() for w in writers] == [0, 0]
    assert cache.load(key)["writer"] in "xy" and seen <= {"x", "y"}
    assert [p.name for p in cache.path(key).parent.iterdir()] == [f"{key}.json"]


class _Inner:
    """An inner backend whose kernel's PTX mentions another symbol, `foo_2`."""

    target, arch, device = "cuda", "sm_90", H100

    def __init__(self):
        self.names = []

    def compile(self, fusion, args, unique_name):
        name = unique_name("foo")
        self.names.append(name)
        kernel = ManifestKernel(name, (1, 1, 1), (32, 1, 1), 0, 1, ptx=f".entry {name}(\n// calls foo_2\n")
        return [CompiledKernel(kernel, (0,), {})]


def test_a_hit_whose_new_name_already_occurs_in_the_kernel_compiles_instead(tmp_path):
    fusion = parse_module(MODULE).entry.root
    backend = CachingBackend(_Inner(), KernelCache(tmp_path))
    taken: list[str] = []

    def namer(start):
        def unique(preferred):  # a module's namer: `foo_<start>`, then the next
            name = f"{preferred}_{start + len(taken)}"
            taken.append(name)
            return name
        return unique

    first = backend.compile(fusion, [], namer(1))
    backend.finish()  # entries are stored once the kernels are complete
    assert first[0].kernel.name == "foo_1" and backend.stored == 1
    taken.clear()
    second = backend.compile(fusion, [], namer(2))
    backend.finish()
    # the entry would have renamed `foo_1` to `foo_2` beside another `foo_2`: compiled instead, under
    # the name the module already gave it (no name skipped)
    assert (backend.hits, backend.misses) == (0, 2)
    assert backend.inner.names == ["foo_1", "foo_2"] and taken == ["foo_2"]
    assert second[0].kernel.ptx == ".entry foo_2(\n// calls foo_2\n"


def test_a_kernel_name_inside_another_symbol_is_not_templated():
    ptx = ".entry k(\n.param k_param_0\n"
    assert kernel_cache._template(ptx, "k", "@") == ".entry @(\n.param @_param_0\n"
    assert kernel_cache._template("define void @k() {}\ndefine void @k.fn()", "k", "@") is None


def test_default_directory_follows_the_xdg_rules(tmp_path, monkeypatch):
    monkeypatch.delenv("HLO_TOOLCHAIN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "hlo-toolchain"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "hlo-toolchain"
    monkeypatch.setenv("HLO_TOOLCHAIN_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"


def test_the_cli_default_is_the_users_cache_directory(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)
    env = {k: v for k, v in os.environ.items() if k not in ("HLO_TOOLCHAIN_CACHE_DIR", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path / "home")
    proc = _codegen(["--target", "host", "--no-cache", str(src)], env=env)
    assert proc.wait() == 0 and not (tmp_path / "home").exists()
    proc = _codegen(["--target", "host", str(src)], env=env)
    assert proc.wait() == 0
    assert len(list((tmp_path / "home" / ".cache" / "hlo-toolchain" / "kernels").rglob("*.json"))) == 2


def test_the_tests_use_a_cache_of_their_own():
    # tests/conftest.py points every compile of the test run at a temporary directory
    mine = Path(os.environ["HLO_TOOLCHAIN_CACHE_DIR"])
    assert default_cache_dir() == mine and mine.name.startswith("hlo-test-kernel-cache-")
    assert Path.home() not in mine.parents
    assert compiler.CompileOptions().cache_dir is None  # in-process compiles cache only when asked


def test_codegen_in_a_subprocess_of_the_tests_gets_the_tests_cache(tmp_path):
    code = textwrap.dedent("""
        from hlo_codegen.kernel_cache import default_cache_dir
        print(default_cache_dir())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == os.environ["HLO_TOOLCHAIN_CACHE_DIR"]


def test_hlo_run_compiling_hlo_text_uses_the_cache_of_its_environment(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)
    env = dict(os.environ, HLO_TOOLCHAIN_CACHE_DIR=str(tmp_path / "cache"))
    cmd = [sys.executable, "-m", "hlo_run.cli", "--platform", "host", "--no-hlo-passes", str(src)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "cache" / "kernels").rglob("*.json"))) == 2
