"""rng-get-and-update-state through hlo-codegen and hlo-run: one kRngGetAndUpdateState thunk per
instruction, which writes the 128-bit state (low word first) and advances it by `delta`.

Expected values come from XLA's rule worked by hand (the state starts at 0x7012395 and each
instruction returns the state before its own advance, modulo 2^128) and from the reference
interpreter, a different code path."""

from __future__ import annotations

import json

import numpy as np
import pytest
from codegen_testlib import compile_text as compile_with_fake_kernels

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_codegen.thunks import thunk_sequence_to_string
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import ManifestError, body_digest, load_manifest
from hlo_common.manifest.thunks import RngGetAndUpdateStateThunk, walk
from hlo_common.hlo.parser import parse_module
from hlo_run.backends.host import HostDevice
from hlo_run.manifest_runtime import ManifestExecutable

INITIAL = 0x7012395
BIG = (1 << 63) - 1  # the largest delta; two of them carry into the high word

TWO_STATES = f"""HloModule two_states
ENTRY e {{
  a = u64[2] rng-get-and-update-state(), delta={BIG}
  b = u64[2] rng-get-and-update-state(), delta={BIG}
  c = u64[2] rng-get-and-update-state(), delta=4
  ROOT t = (u64[2], u64[2], u64[2]) tuple(a, b, c)
}}"""

IN_A_LOOP = """HloModule in_a_loop
cond {
  s = (s32[], u64[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], u64[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  st = u64[2] rng-get-and-update-state(), delta=131072
  ROOT t = (s32[], u64[2]) tuple(next, st)
}
ENTRY e {
  zero = s32[] constant(0)
  z = u64[2] constant({0, 0})
  init = (s32[], u64[2]) tuple(zero, z)
  w = (s32[], u64[2]) while(init), condition=cond, body=body
  last = u64[2] get-tuple-element(w), index=1
  after = u64[2] rng-get-and-update-state(), delta=1
  ROOT r = (u64[2], u64[2]) tuple(last, after)
}"""


def words(state: int) -> np.ndarray:
    state %= 1 << 128
    return np.array([state & ((1 << 64) - 1), state >> 64], np.uint64)


def host_run(text: str, runs: int = 1):
    manifest = compile_module(parse_module(text), CompileOptions(target="host")).manifest
    manifest = load_manifest(manifest.to_bytes(), "m.json")  # as hlo-run reads it
    executable = ManifestExecutable(manifest, HostDevice(), "m")
    try:
        return [executable.run([]) for _ in range(runs)]
    finally:
        executable.close()


def assert_tuples_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_states_and_128_bit_carry_match_the_hand_rule_and_the_interpreter():
    want = (words(INITIAL), words(INITIAL + BIG), words(INITIAL + 2 * BIG))
    assert list(want[2]) == [INITIAL - 2, 1]  # 2 * BIG = 2^64 - 2: the carry reached the high word
    (got,) = host_run(TWO_STATES)
    assert_tuples_equal(got, want)
    assert_tuples_equal(got, evaluate(parse_module(TWO_STATES), []))


def test_every_run_starts_from_the_initial_state():
    first, second = host_run(TWO_STATES, runs=2)
    assert_tuples_equal(first, second)


def test_state_advances_per_loop_iteration():
    (got,) = host_run(IN_A_LOOP)
    assert_tuples_equal(got, (words(INITIAL + 2 * 131072), words(INITIAL + 3 * 131072)))
    assert_tuples_equal(got, evaluate(parse_module(IN_A_LOOP), []))


@pytest.fixture(scope="module")
def compiled():
    result, backend = compile_with_fake_kernels(TWO_STATES)
    assert backend.calls == []  # no kernel: the runtime keeps the state
    return result


def test_one_thunk_per_instruction_with_its_delta(compiled):
    thunks = [t for t in walk(compiled.manifest.thunks) if isinstance(t, RngGetAndUpdateStateThunk)]
    assert [(t.profile_annotation, t.delta, t.destination.size) for t in thunks] == \
        [("a", BIG, 16), ("b", BIG, 16), ("c", 4, 16)]
    text = thunk_sequence_to_string(compiled.manifest.thunks)
    assert f"kRngGetAndUpdateState\tprofile_annotation=a, dst={thunks[0].destination}, delta={BIG}" in text


def test_manifest_round_trip_is_exact(compiled):
    data = compiled.manifest.to_bytes()
    loaded = load_manifest(data, "m.json")
    assert loaded.to_bytes() == data and loaded.thunks == compiled.manifest.thunks


def _first_rng_thunk(body):
    return next(t for t in body["thunks"]["thunks"] if t["kind"] == "kRngGetAndUpdateState")


@pytest.mark.parametrize("change, message", [
    (lambda t: t.update(destination=[t["destination"][0], t["destination"][1], 8]),
     "the 128-bit state needs 16 bytes, the slice has 8"),
    (lambda t: t.pop("delta"), "missing 'delta'"),
    (lambda t: t.update(delta="1"), "delta: expected an integer"),
])
def test_bad_thunk_is_one_manifest_error_line(compiled, change, message):
    body = json.loads(compiled.manifest.to_bytes())
    change(_first_rng_thunk(body))
    body["integrity"] = {"sha256": body_digest(body)}
    with pytest.raises(ManifestError) as info:
        load_manifest(json.dumps(body).encode(), "bad.json")
    text = str(info.value)
    assert text.startswith("bad.json: ") and message in text and "\n" not in text


def test_cuda_manifest_has_the_thunk_and_no_kernel():
    manifest = compile_module(parse_module(TWO_STATES), CompileOptions(target="cuda")).manifest
    assert manifest.kernels == {}
    assert sum(isinstance(t, RngGetAndUpdateStateThunk) for t in walk(manifest.thunks)) == 3
