"""The manifest: JSON round trip, byte-identical output across hash seeds, and every way a
manifest can be refused (one ManifestError line naming the problem)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from codegen_testlib import KERNEL_FREE, compile_text

from hlo_common.manifest.manifest import (FORMAT_NAME, FORMAT_VERSION, ManifestError, body_digest,
                                          load_manifest)


@pytest.fixture(scope="module")
def compiled():
    result, _ = compile_text(KERNEL_FREE)
    return result


def test_round_trip_is_exact(compiled):
    data = compiled.manifest.to_bytes()
    loaded = load_manifest(data, "m.json")
    assert loaded.to_bytes() == data
    assert loaded.thunks == compiled.manifest.thunks
    assert loaded.allocations == compiled.manifest.allocations
    assert loaded.entry == compiled.manifest.entry
    body = json.loads(data)
    assert (body["format"], body["version"], body["target"], body["arch"]) == (FORMAT_NAME, FORMAT_VERSION,
                                                                              "host", "host")
    assert body["integrity"]["sha256"] == body_digest(body)


def test_constants_are_stored_in_physical_layout(compiled):
    import numpy as np

    (const,) = [a for a in compiled.manifest.allocations if a.kind == "constant" and a.size == 64]
    assert np.array_equal(np.frombuffer(const.constant, np.float32).reshape(4, 4), np.diag([1, 2, 3, 4]))
    kinds = sorted(a.kind for a in compiled.manifest.allocations)
    assert kinds.count("parameter") == 3


def _codegen(path, seed: str) -> bytes:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    proc = subprocess.run([sys.executable, "-m", "hlo_codegen.cli", "--target", "host", str(path)],
                          capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def test_byte_identical_under_different_hash_seeds(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(KERNEL_FREE)
    outputs = {_codegen(path, seed) for seed in ("0", "1", "12345")}
    assert len(outputs) == 1
    load_manifest(outputs.pop(), "m.json")


# -- refusals -----------------------------------------------------------------------------------------
def _resign(body: dict) -> bytes:
    body["integrity"] = {"sha256": body_digest(body)}
    return json.dumps(body).encode()


def _mutated(compiled, mutate) -> bytes:
    body = json.loads(compiled.manifest.to_bytes())
    mutate(body)
    return _resign(body)


def _first_kernel_thunk(body):
    return body["thunks"]["thunks"][0]


def _set(path, value):
    def mutate(body):
        node = body
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


@pytest.mark.parametrize("mutate, message", [
    (_set(["version"], 1), "manifest format version 1; this tool reads version 3"),
    (_set(["format"], "something-else"), "not an hlo-toolchain-manifest file"),
    (_set(["target"], "tpu"), "target 'tpu' is not one of cuda, host"),
    (lambda b: _first_thunk(b).update(source=[99, 0, 64]), "references unknown allocation 99"),
    (lambda b: _first_thunk(b).update(source=[_first_thunk(b)["source"][0], 8, 64]),
     "lies outside allocation"),
    (lambda b: _first_thunk(b).update(kind="kTeleport"), "unknown thunk kind 'kTeleport'"),
    (lambda b: _first_thunk(b).pop("destination"), "thunks.thunks[0]: missing 'destination'"),
    (lambda b: b["allocations"][_const(b)].update(constant="not base64!"), "constant: not valid base64"),
    (lambda b: b["allocations"][_const(b)].update(constant="AAAA"), "holds 3 bytes"),
    (lambda b: b["allocations"][_param(b)].update(parameter_number=7), "parameter 7, but the entry takes 3"),
    (lambda b: b["entry"]["outputs"].pop(), "entry.outputs name leaves"),
    (lambda b: b["entry"].update(result_shape="f32[4,4"), "bad shape"),
])
def test_bad_manifest_is_one_line_naming_the_problem(compiled, mutate, message):
    data = _mutated(compiled, mutate)
    with pytest.raises(ManifestError) as info:
        load_manifest(data, "bad.json")
    text = str(info.value)
    assert text.startswith("bad.json: ") and message in text and "\n" not in text


def _first_thunk(body):
    return next(t for t in body["thunks"]["thunks"] if t["kind"] == "kCopy")


def _param(body):
    return next(i for i, a in enumerate(body["allocations"]) if a["kind"] == "parameter")


def _const(body):
    return next(i for i, a in enumerate(body["allocations"]) if a["kind"] == "constant")


def test_hand_edit_fails_the_integrity_check(compiled):
    body = json.loads(compiled.manifest.to_bytes())
    body["allocations"][0]["size"] += 4
    with pytest.raises(ManifestError, match="integrity check failed.*edited by hand"):
        load_manifest(json.dumps(body), "edited.json")


def test_truncated_and_non_json(compiled):
    data = compiled.manifest.to_bytes()
    with pytest.raises(ManifestError, match="truncated.json: truncated: "):
        load_manifest(data[: len(data) // 2], "truncated.json")
    with pytest.raises(ManifestError, match="x.json: not valid JSON"):
        load_manifest(b"{ nope }", "x.json")
    with pytest.raises(ManifestError, match="expected an object"):
        load_manifest(b"[1, 2]", "x.json")


KERNELS = """HloModule k
ENTRY e { p = f32[8] parameter(0) n = f32[8] negate(p) ROOT a = f32[8] abs(n) }"""


@pytest.fixture(scope="module")
def with_kernels():
    result, _ = compile_text(KERNELS)
    return result


@pytest.mark.parametrize("mutate, message", [
    (lambda b: _first_kernel_thunk(b).update(kernel="missing"), "references unknown kernel 'missing'"),
    (lambda b: _first_kernel_thunk(b)["args"].pop(),
     "passes 1 arguments to kernel wrapped_negate, which takes 2"),
    (lambda b: b["kernels"][0].pop("llvm_ir"), "kernel wrapped_abs has no llvm_ir for target host"),
    (lambda b: _first_kernel_thunk(b).update(grid=[2, 1, 1]), "launch dimensions differ"),
    (lambda b: b["kernels"].append(dict(b["kernels"][0])), "a second kernel named wrapped_abs"),
    (lambda b: _first_kernel_thunk(b)["args"][1].update(outputs=[[-1]]),
     r"args\[1\].outputs: expected lists of non-negative integers"),
])
def test_bad_kernel_references(with_kernels, mutate, message):
    with pytest.raises(ManifestError, match=message):
        load_manifest(_mutated(with_kernels, mutate), "k.json")


def test_kernel_thunk_round_trip(with_kernels):
    data = with_kernels.manifest.to_bytes()
    loaded = load_manifest(data, "k.json")
    assert sorted(loaded.kernels) == ["wrapped_abs", "wrapped_negate"]
    assert loaded.thunks == with_kernels.manifest.thunks


def test_kernel_arguments_name_the_outputs_they_hold(with_kernels):
    """A written argument says which output leaves of the instruction it holds (--find-first-mismatch
    reads an output from there); a manifest written before `outputs` existed still loads."""
    kernels = [t for t in with_kernels.manifest.thunks.thunks if t.kind == "kKernel"]
    # negate reads p and writes its own buffer; abs writes in place into negate's, its only argument
    assert [[a.outputs for a in t.args] for t in kernels] == [[(), ((),)], [((),)]]

    def drop_outputs(body):
        for t in body["thunks"]["thunks"]:
            for a in t.get("args", []):
                a.pop("outputs", None)
    loaded = load_manifest(_mutated(with_kernels, drop_outputs), "old.json")
    assert all(a.outputs == () for t in loaded.thunks.thunks if t.kind == "kKernel" for a in t.args)
