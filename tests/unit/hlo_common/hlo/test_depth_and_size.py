"""Depth and size: computations nested deeper than MAX_CALL_DEPTH are refused with FILE:LINE:COL
by the parser (10,000 nested calls hit Python's recursion limit in the interpreter at 200 and in
hlo-codegen's copy insertion at 1,000); at the limit every tool runs them; a computation calling
itself and an array of more than 2^63-1 bytes are located errors; deep JSON is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hlo_common.errors import HloParseError, VerificationError
from hlo_common.hlo.call_depth import MAX_CALL_DEPTH
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.verifier import verify_module
from hlo_common.interpreter.evaluator import evaluate

BIN = Path(sys.executable).parent


def nested(kind: str, levels: int) -> str:
    """A module whose computations nest `levels` deep (the entry is level 1) through `kind`."""
    n = levels - 2  # c0..c{n} below the entry
    out = [f"HloModule deep_{kind}", "",
           f"c{n} {{\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)\n}}",
           "leaf {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] abs(p)\n}"]
    for k in range(n - 1, -1, -1):
        if kind == "call":
            body = f"  ROOT r = f32[4] call(p), to_apply=c{k + 1}"
        elif kind == "conditional":
            body = (f"  t = pred[] constant(true)\n  ROOT r = f32[4] conditional(t, p, p), "
                    f"true_computation=c{k + 1}, false_computation=leaf")
        else:
            out.append(f"w{k} {{\n  p = f32[4] parameter(0)\n  ROOT f = pred[] constant(false)\n}}")
            body = f"  ROOT r = f32[4] while(p), condition=w{k}, body=c{k + 1}"
        out.append(f"c{k} {{\n  p = f32[4] parameter(0)\n{body}\n}}")
    out.append("ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] call(p), to_apply=c0\n}")
    return "\n\n".join(out) + "\n"


def test_ten_thousand_nested_calls_are_a_located_error_naming_the_limit():
    text = nested("call", 10_000)
    with pytest.raises(HloParseError) as info:
        parse_module(text, "deep.hlo")
    err = info.value
    assert err.message == (f"computations nest more than {MAX_CALL_DEPTH} deep: %r calls level "
                           f"{MAX_CALL_DEPTH + 1} of a chain of calls, while loops and conditionals "
                           f"(the limit is {MAX_CALL_DEPTH})")
    # the call that opens level 129 is in computation c{127 - 1}'s body, counted from the entry down
    line = text.splitlines()[err.line - 1]
    assert line == f"  ROOT r = f32[4] call(p), to_apply=c{MAX_CALL_DEPTH - 1}"


@pytest.mark.parametrize("kind", ["call", "conditional", "while"])
def test_one_level_over_the_limit_is_refused_and_the_limit_itself_is_not(kind: str):
    with pytest.raises(HloParseError, match=f"computations nest more than {MAX_CALL_DEPTH} deep"):
        parse_module(nested(kind, MAX_CALL_DEPTH + 1), "deep.hlo")
    parse_module(nested(kind, MAX_CALL_DEPTH), "deep.hlo")


@pytest.mark.parametrize("kind", ["call", "conditional", "while"])
def test_every_tool_runs_modules_nested_to_the_limit(tmp_path: Path, kind: str):
    src = tmp_path / "deep.hlo"
    src.write_text(nested(kind, MAX_CALL_DEPTH))
    x = np.float32([1, -2, 3, -4])
    want = -x if kind != "while" else x  # the while conditions are false: the state passes through
    np.testing.assert_array_equal(evaluate(parse_module(src.read_text()), [x]), want)
    opt = subprocess.run([str(BIN / "hlo-opt"), str(src)], capture_output=True, text=True, timeout=300)
    assert opt.returncode == 0, opt.stderr
    codegen = subprocess.run([str(BIN / "hlo-codegen"), "--target", "host", str(src), "-o",
                              str(tmp_path / "m.json")], capture_output=True, text=True, timeout=300)
    assert codegen.returncode == 0, codegen.stderr
    run = subprocess.run([str(BIN / "hlo-run"), "--platform", "host", "--no-hlo-passes", str(src)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr


def test_a_computation_that_calls_itself_is_located():
    text = ("HloModule m\nc {\n  p = f32[4] parameter(0)\n  ROOT a = f32[4] call(p), to_apply=c\n}\n"
            "ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT a = f32[4] call(p), to_apply=c\n}\n")
    with pytest.raises(HloParseError) as info:
        parse_module(text, "self.hlo")
    assert str(info.value) == ("self.hlo:4:37: to_apply=c calls computation 'c' from inside itself; HLO "
                               "has no recursion")


@pytest.mark.parametrize("shape, col", [
    ("f32[4294967296,4294967296,16]", 12),  # 2^70 bytes: passed the verifier and reached a manifest
    ("f32[9223372036854775807]", 12),
    ("(f32[2], f32[4611686018427387904])", 21),
])
def test_arrays_over_int64_bytes_are_refused_with_their_place(shape: str, col: int):
    text = f"HloModule m\nENTRY e {{\n  ROOT p = {shape} parameter(0)\n}}\n"
    message = r"holds \d+ bytes; an array may hold at most 2\^63-1 bytes"
    with pytest.raises(HloParseError, match=message) as info:
        parse_module(text, "big.hlo")
    assert (info.value.line, info.value.col) == (3, col)


@pytest.mark.parametrize("shape", ["pred[9223372036854775807]", "f32[2305843009213693951]",
                                   "s4[18446744073709551614]"])
def test_arrays_of_exactly_int64_max_bytes_or_less_parse(shape: str):
    parse_module(f"HloModule m\nENTRY e {{\n  ROOT p = {shape} parameter(0)\n}}\n", "ok.hlo")


def test_the_verifier_refuses_an_oversized_shape_a_pass_made():
    module = parse_module("HloModule m\nENTRY e {\n  ROOT p = f32[4] parameter(0)\n}\n", "m.hlo")
    module.entry.root.shape = Shape.array("f32", (1 << 40, 1 << 40))
    with pytest.raises(VerificationError, match=r"^m.hlo:3:8: in computation e, instruction %p: shape "
                                                r"f32\[1099511627776,1099511627776\] holds"):
        verify_module(module)


def test_verifier_errors_on_parsed_text_name_the_place_in_every_tool(tmp_path: Path):
    src = tmp_path / "m.hlo"
    src.write_text("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT a = f32[5] add(p, p)\n}\n")
    for tool, args in (("hlo-opt", []), ("hlo-codegen", ["--target", "host"]), ("hlo-run", [])):
        proc = subprocess.run([str(BIN / tool), *args, str(src)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1
        assert proc.stderr.splitlines()[-1].startswith(f"{tool}: error: {src}:4:8: verification failed ")


@pytest.mark.parametrize("what", ["manifest", "device"])
def test_json_nested_five_thousand_deep_is_one_line(tmp_path: Path, what: str):
    deep = "[" * 5000 + "]" * 5000
    path = tmp_path / f"{what}.json"
    if what == "manifest":
        path.write_text('{"format": ' + deep + "}")
        cmd = [str(BIN / "hlo-run"), str(path)]
        want = f"hlo-run: error: {path}: nested too deeply"
    else:
        path.write_text('{"name": "x", "core_count": ' + deep + "}")
        src = tmp_path / "m.hlo"
        src.write_text("ENTRY e { p = f32[4] parameter(0) ROOT n = f32[4] negate(p) }")
        cmd = [str(BIN / "hlo-opt"), "--device", str(path), str(src)]
        want = f"hlo-opt: error: {path}: JSON nested too deeply"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(want)
