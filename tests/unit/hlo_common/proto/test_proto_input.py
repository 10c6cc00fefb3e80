"""HloModuleProto and HloSnapshot input (hlo_common.proto, hlo_common.source.read_input, the CLIs'
--input_format), checked against files XLA itself writes: tests/helpers/make_proto_dumps.py runs a JAX program with
XLA's dump flags (jax is a test-only dependency), and XLA's text dump of each module is the
reference its proto must read to."""

from __future__ import annotations

import glob
import subprocess
import sys
from pathlib import Path

import numpy as np
import proto_lib
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.source import read_input

pytest.importorskip("jax", reason="XLA (jaxlib) writes the protos these tests read")
HELPERS = Path(__file__).resolve().parents[3] / "helpers"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("xla_dump")
    subprocess.run([sys.executable, str(HELPERS / "make_proto_dumps.py"), str(out)], check=True, timeout=300,
                   capture_output=True)

    def one(pattern: str) -> Path:
        found = sorted(glob.glob(str(out / f"*jit_proto_probe*{pattern}")))
        assert found, f"XLA wrote no {pattern} for the probe: {sorted(p.name for p in out.iterdir())}"
        return Path(found[0])
    return {"before_pb": one("before_optimizations.hlo.pb"), "before_txt": one("before_optimizations.txt"),
            "after_pb": one("after_optimizations.hlo.pb"), "after_txt": one("after_optimizations.txt"),
            "snapshot": one("snapshot.*.pb")}


def _tool(module: str, *args: str, check_rc: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300,
                          check=False)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stderr[-2000:]
    return proc


@pytest.mark.parametrize("stage", ["before", "after"])
def test_xla_dumped_proto_reads_as_xla_dumped_text(dumps, stage) -> None:
    """The proto XLA wrote (HloModuleProto before its passes; HloProto with buffer assignment,
    schedule, fusions and layouts after) reads to the module our parser gives from XLA's text dump."""
    got = read_input(dumps[f"{stage}_pb"])
    assert got.format == "pb"
    expected = print_module(parse_module(dumps[f"{stage}_txt"].read_text(), "dump"))
    assert proto_lib.canonical(got.text) == proto_lib.canonical(expected)


def test_text_proto_reads_as_the_binary_one(dumps, tmp_path) -> None:
    from google.protobuf import text_format

    from hlo_common.proto.messages import HloProto

    msg = HloProto.FromString(dumps["after_pb"].read_bytes())
    pbtxt = tmp_path / "m.pbtxt"
    pbtxt.write_text(text_format.MessageToString(msg.hlo_module))
    assert read_input(pbtxt).text == read_input(dumps["after_pb"]).text
    assert read_input(pbtxt, "pbtxt").format == "pbtxt"


def test_proto_round_trips_through_the_ir(dumps) -> None:
    """proto -> IR -> text -> IR prints the same (the printed module is a fixed point)."""
    first = read_input(dumps["after_pb"]).text
    assert print_module(parse_module(first, "again")) == first


def test_snapshot_arguments_and_result_are_xla_s(dumps) -> None:
    snap = read_input(dumps["snapshot"]).snapshot
    x = (np.arange(12.0, dtype=np.float32).reshape(3, 4) - 5.5) / 8
    np.testing.assert_array_equal(snap.arguments[0], x)
    np.testing.assert_array_equal(snap.arguments[2], np.array([2, 0], dtype=np.int32))
    assert isinstance(snap.result, tuple) and len(snap.result) == 3
    assert snap.result[0].dtype.name == "bfloat16" and snap.result[2].dtype == np.int32


def test_hlo_run_runs_a_snapshot_on_its_arguments_and_checks_its_result(dumps) -> None:
    proc = _tool("hlo_run.cli", "--platform", "interpreter", "--input_format=snapshot", "--print-literals",
                 str(dumps["snapshot"]))
    assert "** Argument 0 **\nf32[3,4] { {-0.6875, -0.5625, -0.4375, -0.3125}" in proc.stdout
    assert "snapshot's recorded result are close enough" in proc.stderr


def test_hlo_run_reports_a_snapshot_whose_result_differs(dumps, tmp_path) -> None:
    from hlo_common.proto.messages import HloSnapshot

    snap = HloSnapshot.FromString(dumps["snapshot"].read_bytes())
    last = snap.result.tuple_literals[2]
    last.s32s[0] += 1
    bad = tmp_path / "bad.snapshot.pb"
    bad.write_bytes(snap.SerializeToString())
    proc = _tool("hlo_run.cli", "--platform", "interpreter", str(bad), check_rc=1)
    assert "differs from the snapshot's recorded result" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_interpreter_results_equal_for_text_and_proto_input(dumps, tmp_path) -> None:
    outs = []
    for key in ("after_txt", "after_pb"):
        out = tmp_path / f"{key}.npz"
        _tool("hlo_run.cli", "--platform", "interpreter", "--seed", "3", "--output", str(out),
              str(dumps[key]))
        with np.load(out) as data:
            outs.append({k: data[k] for k in data.files})
    assert outs[0].keys() == outs[1].keys() and outs[0]
    for k in outs[0]:
        np.testing.assert_array_equal(outs[0][k], outs[1][k])


@pytest.mark.parametrize("case", ["truncated", "text_as_pb", "binary_as_pbtxt", "bad_operand_id",
                                  "unknown_opcode"])
def test_bad_proto_input_is_one_line_exit_1(dumps, tmp_path, case) -> None:
    from hlo_common.proto.messages import HloProto

    data = dumps["before_pb"].read_bytes()
    path, args = tmp_path / "m.pb", []
    if case == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif case == "text_as_pb":
        path, args = dumps["before_txt"], ["--input_format=pb"]
    elif case == "binary_as_pbtxt":
        path.write_bytes(data)
        args = ["--input_format=pbtxt"]
    else:
        msg = HloProto.FromString(data).hlo_module  # XLA's dumps are HloProtos
        last = msg.computations[-1].instructions[-1]
        if case == "bad_operand_id":
            last.operand_ids[0] = 987654321
        else:
            last.opcode = "frobnicate"
        path.write_bytes(msg.SerializeToString())
    proc = _tool("hlo_opt.cli", "--pipeline", "none", *args, str(path), check_rc=1)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hlo-opt: error: ") and str(path) in lines[0], proc.stderr
    if case == "bad_operand_id":
        assert "operand_ids[0] = 987654321" in lines[0] and "instruction '" in lines[0]
    if case == "unknown_opcode":
        assert f"instruction '{last.name}'" in lines[0] and "frobnicate" in lines[0]
