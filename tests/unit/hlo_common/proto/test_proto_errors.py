"""Malformed and invalid protos, without jaxlib: every tool verifies a proto's module as it does
HLO text, and a proto that does not describe a module (truncated, another message, an unknown
opcode, ids that name nothing) is one line naming the file and the field or instruction, exit 1,
no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.proto.hlo_to_proto import module_to_proto
from hlo_common.proto.messages import ShapeProto

TEXT = "HloModule m\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  ROOT n = f32[2]{0} negate(p)\n}\n"
TOOLS = {"hlo_opt.cli": ["--pipeline", "none"], "hlo_codegen.cli": ["--target", "host"],
         "hlo_run.cli": ["--platform", "interpreter"]}


def _proto():
    return module_to_proto(parse_module(TEXT, "m"))


def _bad(case: str) -> bytes:
    proto = _proto()
    negate = proto.computations[0].instructions[1]
    if case == "shape":
        negate.shape.dimensions[0] = 3
    elif case == "truncated":
        return proto.SerializeToString()[:-7]
    elif case == "wrong_message":
        return ShapeProto(element_type=11, dimensions=[2, 3]).SerializeToString()
    elif case == "unknown_opcode":
        negate.opcode = "frobnicate"
    elif case == "root_id":
        proto.computations[0].root_id = 99
    elif case == "operand_id":
        negate.operand_ids[0] = 42
    return proto.SerializeToString()


def _one_line_error(tool: str, path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", tool, *TOOLS[tool], *args, str(path)], capture_output=True,
                          text=True, timeout=300, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(path) in lines[0]
    return lines[0]


@pytest.mark.parametrize("fmt", ["pb", "pbtxt"])
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_tool_verifies_a_proto_s_module(tmp_path, tool, fmt) -> None:
    """The error names the file, the computation and the instruction, and no line:col: the text
    the tools parse for a proto is the reader's own, so its lines are nowhere in the user's file."""
    from google.protobuf import text_format

    from hlo_common.proto.messages import HloModuleProto

    path = tmp_path / f"m.{fmt}"
    data = _bad("shape")
    if fmt == "pbtxt":
        data = text_format.MessageToString(HloModuleProto.FromString(data)).encode()
    path.write_bytes(data)
    line = _one_line_error(tool, path)
    assert line.split(": error: ", 1)[1].startswith(f"{path}: verification failed in the input: "), line
    assert "in computation e, instruction %n:" in line and "f32[3]" in line


@pytest.mark.parametrize("case, words", [
    ("truncated", "not a binary HloModuleProto"),
    ("wrong_message", "not a binary HloModuleProto, HloProto or HloSnapshot"),
    ("unknown_opcode", "instruction 'n'"),
    ("root_id", "root_id 99 names no instruction"),
    ("operand_id", "operand_ids[0] = 42 names no instruction"),
])
def test_malformed_proto_is_one_line_naming_the_file_and_field(tmp_path, case, words) -> None:
    path = tmp_path / "m.pb"
    path.write_bytes(_bad(case))
    line = _one_line_error("hlo_opt.cli", path)
    assert words in line
    if case == "unknown_opcode":
        assert "frobnicate" in line


def test_a_snapshot_whose_arguments_do_not_fit_is_one_line(tmp_path) -> None:
    from hlo_common.proto.messages import HloSnapshot

    snap = HloSnapshot()
    snap.hlo.hlo_module.CopyFrom(_proto())
    arg = snap.arguments.add()
    arg.shape.CopyFrom(ShapeProto(element_type=11, dimensions=[2]))
    arg.f32s.extend([1.0])  # one value for two elements
    path = tmp_path / "s.pb"
    path.write_bytes(snap.SerializeToString())
    line = _one_line_error("hlo_run.cli", path)
    assert "arguments[0]" in line and "f32s holds 1 values for 2" in line
