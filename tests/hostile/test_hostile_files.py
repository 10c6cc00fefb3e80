"""Hostile flags, output paths, .npz inputs, manifests and runs (issue 22 item 10): each case
checks the exit code, one error line naming the place (the flag, the file and array, the kernel,
the instruction), no traceback, and that no file is partial, stray or replaced."""

from __future__ import annotations

import io
import json
import os
import stat
import zipfile

import numpy as np
import pytest

from hostile_lib import GOOD, TOOLS, assert_refused, folder_state, invoke

OUT_FLAG = {"hlo-opt": "-o", "hlo-codegen": "-o", "hlo-run": "--output"}


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(GOOD)
    return path


# -- flags: usage errors, exit 2, naming the flag -------------------------------------------------
FLAGS = [
    ("hlo-run", ["--iterations", "0"], r"--iterations"),
    ("hlo-run", ["--iterations", "99999999999999999999"], r"--iterations"),
    ("hlo-run", ["--seed", "-1"], r"--seed"),
    ("hlo-run", ["--abs-error-bound", "nan"], r"--abs-error-bound"),
    ("hlo-run", ["--rel-error-bound", "-1"], r"--rel-error-bound"),
    ("hlo-run", ["--rel-error-bound", "inf"], r"--rel-error-bound"),
    ("hlo-run", ["--max-while-iterations", "-5"], r"--max-while-iterations"),
    ("hlo-run", ["--platform", "tpu"], r"--platform"),
    ("hlo-run", ["--reference-platform", "gpu9"], r"--reference-platform"),
    ("hlo-run", ["--no-such-flag"], r"--no-such-flag"),
    ("hlo-codegen", ["--arch", "sm_60"], r"--arch"),
    ("hlo-codegen", ["--arch", "sm_9999"], r"--arch"),
    ("hlo-codegen", ["--target", "tpu"], r"--target"),
    ("hlo-codegen", ["-j", "0"], r"-j|--jobs"),
    ("hlo-codegen", ["--dump-module-id", "-1"], r"--dump-module-id"),
    ("hlo-opt", ["--pipeline", "fast"], r"--pipeline"),
    ("hlo-opt", ["--dump-format", "pdf"], r"--dump-format"),
    ("hlo-opt", ["--dump-module-id", "100000"], r"--dump-module-id"),
]


@pytest.mark.parametrize("tool, args, place", FLAGS, ids=[f"{t}{' '.join(a)}" for t, a, _ in FLAGS])
def test_bad_flags_are_usage_errors(tool, args, place, good, capsys, monkeypatch):
    before = folder_state(good.parent)
    base = tool != "hlo-codegen" or "--target" not in args
    result = invoke(tool, [*args, str(good)], capsys, monkeypatch, base=base)
    assert_refused(result, tool, place, code=2)
    assert folder_state(good.parent) == before


@pytest.mark.parametrize("tool, args, place", [
    ("hlo-opt", ["--passes", "nope"], r"unknown pass 'nope'"),
    ("hlo-opt", ["--device", "nope"], r"unknown device 'nope'"),
    ("hlo-opt", ["--dump-pass-re", "(", "--dump-to", "DUMPS"], r"--dump-pass-re"),
    ("hlo-run", ["--inputs", "MISSING.npz"], r"none\.npz': no such file"),
], ids=["passes", "device", "dump-re", "inputs-missing"])
def test_bad_flag_values_name_the_value(tool, args, place, good, capsys, monkeypatch):
    args = [a.replace("DUMPS", str(good.parent / "d")).replace("MISSING", str(good.parent / "none"))
            for a in args]
    result = invoke(tool, [*args, str(good)], capsys, monkeypatch)
    assert_refused(result, tool, place)


# -- output paths ---------------------------------------------------------------------------------
def _mknod(path, minor):
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")


@pytest.mark.parametrize("tool", TOOLS)
def test_output_to_a_full_device(tool, good, capsys, monkeypatch):
    full = good.parent / "full"
    _mknod(full, 7)  # Linux's /dev/full numbers, a node of our own
    result = invoke(tool, [str(good), OUT_FLAG[tool], str(full)], capsys, monkeypatch)
    assert_refused(result, tool, rf"{full}.*No space left on device", progress=r"(Running|\.\.\.|\*\*)")
    assert stat.S_ISCHR(full.stat().st_mode)


@pytest.mark.parametrize("tool", TOOLS)
def test_output_to_a_null_device_stays_a_device(tool, good, capsys, monkeypatch):
    null = good.parent / "null"
    _mknod(null, 3)
    result = invoke(tool, [str(good), OUT_FLAG[tool], str(null)], capsys, monkeypatch)
    assert result.code == 0, result.err
    assert stat.S_ISCHR(null.stat().st_mode)
    assert sorted(p.name for p in good.parent.iterdir()) == ["m.hlo", "null"]


@pytest.mark.parametrize("tool", TOOLS)
def test_output_to_a_directory_leaves_it_alone(tool, good, capsys, monkeypatch):
    target = good.parent / "keep"
    target.mkdir()
    (target / "mine.txt").write_text("mine")
    before = folder_state(good.parent)
    result = invoke(tool, [str(good), OUT_FLAG[tool], str(target)], capsys, monkeypatch)
    assert_refused(result, tool, rf"{target}", progress=r"(Running|\.\.\.|\*\*)")
    assert folder_state(good.parent) == before


@pytest.mark.parametrize("tool", TOOLS)
def test_output_into_a_missing_folder(tool, good, capsys, monkeypatch):
    before = folder_state(good.parent)
    target = good.parent / "no" / "such" / "out"
    result = invoke(tool, [str(good), OUT_FLAG[tool], str(target)], capsys, monkeypatch)
    assert_refused(result, tool, rf"{good.parent / 'no'}", progress=r"(Running|\.\.\.|\*\*)")
    assert folder_state(good.parent) == before


@pytest.mark.parametrize("tool", TOOLS)
def test_output_through_a_symlink_replaces_its_target_whole(tool, good, capsys, monkeypatch):
    real = good.parent / "real.out"
    real.write_text("old")
    link = good.parent / "link.out"
    link.symlink_to(real)
    result = invoke(tool, [str(good), OUT_FLAG[tool], str(link)], capsys, monkeypatch)
    assert result.code == 0, result.err
    assert link.is_symlink() and real.read_bytes() != b"old" and len(real.read_bytes()) > 0
    assert sorted(p.name for p in good.parent.iterdir()) == ["link.out", "m.hlo", "real.out"]


@pytest.mark.parametrize("tool", TOOLS)
def test_failed_run_keeps_the_old_output(tool, good, capsys, monkeypatch):
    out = good.parent / "out"
    out.write_text("previous result")
    good.write_text(GOOD.replace("add(m, b)", "add(m, nope)"))
    result = invoke(tool, [str(good), OUT_FLAG[tool], str(out)], capsys, monkeypatch)
    assert_refused(result, tool, r"m\.hlo:17:\d+: ")
    assert out.read_text() == "previous result"
    assert sorted(p.name for p in good.parent.iterdir()) == ["m.hlo", "out"]


# -- hlo-run --inputs: .npz files -----------------------------------------------------------------
def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


GOOD_NPZ = _npz_bytes(arg0=np.zeros(4, np.float32), arg1=np.ones(4, np.float32))


def _encrypted(data: bytes) -> bytes:
    raw = bytearray(data)
    for sig, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        pos = 0
        while (pos := raw.find(sig, pos)) >= 0:
            raw[pos + at] |= 1
            pos += 4
    return bytes(raw)


NPZ_CASES = [
    ("truncated-head", GOOD_NPZ[:30], r"in\.npz: not a readable \.npz"),
    ("truncated-tail", GOOD_NPZ[:-40], r"in\.npz: not a readable \.npz"),
    ("garbage", b"this is not a zip", r"in\.npz: not an \.npz file"),
    ("npy", b"\x93NUMPY" + bytes(100), r"in\.npz: a single \.npy array"),
    ("wrong-dtype", _npz_bytes(arg0=np.zeros(4, np.int32), arg1=np.ones(4, np.float32)),
     r"array 'arg0' has dtype"),
    ("wrong-shape", _npz_bytes(arg0=np.zeros(5, np.float32), arg1=np.ones(4, np.float32)),
     r"array 'arg0' has shape"),
    ("missing-array", _npz_bytes(arg0=np.zeros(4, np.float32)), r"missing array 'arg1'"),
    ("extra-array", _npz_bytes(arg0=np.zeros(4, np.float32), arg1=np.ones(4, np.float32), arg2=np.ones(1)),
     r"unexpected array 'arg2'"),
    ("object-array", _npz_bytes(arg0=np.array([1, "a"], dtype=object), arg1=np.ones(4, np.float32)),
     r"object \(pickled\) arrays"),
    ("encrypted", _encrypted(GOOD_NPZ), r"array 'arg\d' cannot be read .*encrypted"),
    ("corrupt-member", GOOD_NPZ.replace(b"<f4", b"<zz"),
     r"in\.npz: (array 'arg\d' cannot be read|not a readable)"),
]


@pytest.mark.parametrize("cid, data, place", NPZ_CASES, ids=[c[0] for c in NPZ_CASES])
def test_hostile_npz_inputs(cid, data, place, good, capsys, monkeypatch):
    npz = good.parent / "in.npz"
    npz.write_bytes(data)
    before = folder_state(good.parent)
    result = invoke("hlo-run", ["--inputs", str(npz), "--output", str(good.parent / "out.npz"), str(good)],
                    capsys, monkeypatch)
    assert_refused(result, "hlo-run", place)
    assert folder_state(good.parent) == before


def test_s4_value_out_of_range(tmp_path, capsys, monkeypatch):
    path = tmp_path / "s4.hlo"
    path.write_text("HloModule m\nENTRY e {\n  p = s4[4] parameter(0)\n  ROOT n = s4[4] negate(p)\n}\n")
    npz = tmp_path / "in.npz"
    npz.write_bytes(_npz_bytes(arg0=np.int8([1, 100, 2, 3])))
    result = invoke("hlo-run", ["--inputs", str(npz), str(path)], capsys, monkeypatch)
    assert_refused(result, "hlo-run", r"in\.npz: array 'arg0' holds 100, outside s4's range")


# -- manifests ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def manifest_bytes(tmp_path_factory):
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module

    module = parse_module(GOOD, "m.hlo")
    return compile_module(module, CompileOptions(target="host")).manifest.to_bytes()


def _rehashed(body: dict) -> bytes:
    from hlo_common.manifest.manifest import body_digest

    body["integrity"] = {"sha256": body_digest(body)}
    return json.dumps(body).encode()


def _manifest_case(kind: str, data: bytes) -> bytes:
    if kind.startswith("cut"):
        return data[: int(len(data) * int(kind[3:]) / 100)]
    body = json.loads(data)
    if kind == "bad-sha":
        body["integrity"] = {"sha256": "0" * 64}
        return json.dumps(body).encode()
    if kind == "deep-json":
        return b'{"format":' * 5000 + b'1' + b'}' * 5000
    if kind == "not-json":
        return b'{"format": "hlo-toolchain-manifest", oops'
    kernel = body["kernels"][0]
    if kind == "system-call":
        head = f"define void @{kernel['name']}("
        kernel["llvm_ir"] = kernel["llvm_ir"].replace(head, "declare i32 @system(ptr)\n" + head, 1)
    elif kind == "fewer-params":
        kernel["num_params"] = max(0, kernel.get("num_params", 1) - 1)
    return _rehashed(body)


MANIFEST_CASES = [
    ("cut10", r"m\.json"), ("cut50", r"m\.json"), ("cut90", r"m\.json"), ("cut99", r"m\.json"),
    ("bad-sha", r"m\.json.*(sha256|checksum|integrity)"), ("deep-json", r"m\.json: nested too deeply"),
    ("not-json", r"m\.json"),
    ("system-call", r"m\.json: kernel \S+: its LLVM IR declares @system"),
    ("fewer-params", r"m\.json: thunk \d+ .*kernel \S+, which takes"),
]


@pytest.mark.parametrize("kind, place", MANIFEST_CASES, ids=[c[0] for c in MANIFEST_CASES])
def test_hostile_manifests(kind, place, manifest_bytes, tmp_path, capsys, monkeypatch):
    path = tmp_path / "m.json"
    path.write_bytes(_manifest_case(kind, manifest_bytes))
    before = folder_state(tmp_path)
    result = invoke("hlo-run", ["--platform", "host", str(path)], capsys, monkeypatch, base=False)
    assert_refused(result, "hlo-run", place, progress=r"Running HLO module")
    assert folder_state(tmp_path) == before


# -- runs that must be stopped ----------------------------------------------------------------------
FOREVER = """HloModule forever
cond {
  t = s32[] parameter(0)
  ROOT yes = pred[] constant(true)
}
body {
  t = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(t, one)
}
ENTRY e {
  z = s32[] constant(0)
  ROOT w = s32[] while(z), condition=cond, body=body
}
"""


def test_a_loop_that_never_ends_is_stopped_with_its_place(tmp_path, capsys, monkeypatch):
    path = tmp_path / "forever.hlo"
    path.write_text(FOREVER)
    result = invoke("hlo-run", ["--max-while-iterations", "50", str(path)], capsys, monkeypatch)
    assert_refused(result, "hlo-run", r"forever\.hlo:13:\d+: .*while", progress=r"(Running|\.\.\.)")


# -- concurrent writers and signals mid-write ---------------------------------------------------------
def test_concurrent_writers_leave_one_whole_output(good, capsys):
    import threading

    from hlo_common.cli_util import write_file_atomically

    out = good.parent / "out.hlo"
    texts = [f"// writer {k}\n" + GOOD * 200 for k in range(4)]
    threads = [threading.Thread(target=write_file_atomically, args=(out, t)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out.read_text() in texts  # one writer's whole text, never a mix
    assert sorted(p.name for p in good.parent.iterdir()) == ["m.hlo", "out.hlo"]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_stop_signal_mid_write_leaves_no_file(signame, good, capsys, monkeypatch):
    """The signal arrives while the output is being written: the tool exits non-zero, the old
    output stays, and no temporary file is left beside it."""
    import signal

    import hlo_common.cli_util as cli_util

    out = good.parent / "out"
    out.write_text("previous")
    real_fsync = os.fsync

    def fsync_then_signal(fd):
        real_fsync(fd)
        os.kill(os.getpid(), getattr(signal, signame))

    monkeypatch.setattr(cli_util.os, "fsync", fsync_then_signal)
    result = invoke("hlo-opt", [str(good), "-o", str(out)], capsys, monkeypatch)
    expected = {"SIGTERM": (143, "stopped by SIGTERM"), "SIGHUP": (129, "stopped by SIGHUP"),
                "SIGINT": (130, "interrupted")}[signame]
    assert (result.code, result.err) == (expected[0], f"hlo-opt: {expected[1]}\n")
    assert out.read_text() == "previous"
    assert sorted(p.name for p in good.parent.iterdir()) == ["m.hlo", "out"]
