"""hlo-run's command line: exit codes, messages, no tracebacks, npz round trips, literals, --seed."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from hlo_run.cli import cli

ADD = """HloModule add_twice
ENTRY e {
  p = f32[4] parameter(0)
  ROOT a = f32[4] add(p, p)
}
"""
BF16 = """HloModule halve
ENTRY e {
  p = bf16[3] parameter(0)
  h = bf16[] constant(0.5)
  b = bf16[3] broadcast(h), dimensions={}
  ROOT m = bf16[3] multiply(p, b)
}
"""
TUPLE = """HloModule pair
ENTRY e {
  p = f32[2] parameter(0)
  q = s32[] parameter(1)
  n = f32[2] negate(p)
  ROOT t = (f32[2], s32[]) tuple(n, q)
}
"""


def run(args, stdin=None):
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)


@pytest.fixture
def add_file(tmp_path):
    path = tmp_path / "add.hlo"
    path.write_text(ADD)
    return path


def test_success_prints_nothing_on_stdout_and_exits_0(add_file):
    result = run(["--platform", "interpreter", str(add_file)])
    assert result.exit_code == 0 and result.stdout == ""
    assert "with runner interpreter" in result.stderr


def test_print_literals_format(tmp_path, add_file):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, arg0=np.array([1, 2.5, -3, 0], np.float32))
    result = run(["--platform", "interpreter", "--inputs", str(inputs), "--print-literals", str(add_file)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ("** Argument 0 **\nf32[4] {1, 2.5, -3, 0}\n"
                             "** Result **\nf32[4] {2, 5, -6, 0}\n")


def test_print_literals_tuple_result_and_stdin():
    result = run(["--platform", "interpreter", "--print-literals", "-"], stdin=TUPLE)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "** Argument 0 **" and lines[2] == "** Argument 1 **" and lines[4] == "** Result **"
    assert lines[5].startswith("(f32[2], s32[]) ({")


def test_npz_round_trip_with_bf16(tmp_path):
    module = tmp_path / "halve.hlo"
    module.write_text(BF16)
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, arg0=np.array([3.0, -1.0, 0.375], np.float32))
    result = run(["--platform", "interpreter", "--inputs", str(inputs), "--output", str(outputs),
                  str(module)])
    assert result.exit_code == 0, result.stderr
    with np.load(outputs) as out:
        assert out.files == ["out0"] and out["out0"].dtype == np.float32
        np.testing.assert_array_equal(out["out0"], [1.5, -0.5, 0.1875])
    # the output file is a valid --inputs file for the same module again (out0 renamed to arg0)
    with np.load(outputs) as out:
        np.savez(inputs, arg0=out["out0"])
    assert run(["--platform", "interpreter", "--inputs", str(inputs), str(module)]).exit_code == 0


def test_tuple_results_are_written_as_leaves(tmp_path):
    module, outputs = tmp_path / "pair.hlo", tmp_path / "o.npz"
    module.write_text(TUPLE)
    assert run(["--platform", "interpreter", "--output", str(outputs), str(module)]).exit_code == 0
    with np.load(outputs) as out:
        assert out.files == ["out0", "out1"] and out["out1"].dtype == np.int32


def test_seed_is_deterministic_and_matters(tmp_path, add_file):
    def output_for(seed, name):
        path = tmp_path / name
        assert run(["--platform", "interpreter", "--seed", str(seed), "--output", str(path),
                    str(add_file)]).exit_code == 0
        with np.load(path) as out:
            return out["out0"]

    a, b, c = output_for(5, "a.npz"), output_for(5, "b.npz"), output_for(6, "c.npz")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # the documented rule: arg0 = default_rng([seed, 0]).uniform(-1, 1, n) rounded to f32
    np.testing.assert_array_equal(a, 2 * np.random.default_rng([5, 0]).uniform(-1, 1, 4).astype(np.float32))


def test_reference_xla_cpu_matches(add_file):
    pytest.importorskip("jax")
    result = run(["--platform", "interpreter", "--reference-platform", "xla-cpu", str(add_file)])
    assert result.exit_code == 0, result.stderr
    assert "** Results on interpreter and xla-cpu are close enough. **" in result.stderr


def test_mismatch_exits_1_with_worst_elements(add_file, monkeypatch):
    pytest.importorskip("jax")
    from hlo_run.backends import interpreter

    real_run = interpreter.InterpreterExecutable.run
    monkeypatch.setattr(interpreter.InterpreterExecutable, "run",
                        lambda self, args: real_run(self, args) + np.float32([0, 0, 0.5, 0]))
    result = run(["--platform", "interpreter", "--reference-platform", "xla-cpu", str(add_file)])
    assert result.exit_code == 1
    first, *details = result.stderr.split("hlo-run: error: ")[1].splitlines()
    assert "results on interpreter and xla-cpu differ" in first and "1 element(s)" in first
    assert "1 of 4 element(s) differ" in details[0] and "at [2]" in details[1]
    assert "Traceback" not in result.stderr
    # looser bounds accept the same difference
    loose = run(["--platform", "interpreter", "--reference-platform", "xla-cpu", "--abs-error-bound", "1",
                 str(add_file)])
    assert loose.exit_code == 0


def test_xla_cpu_reference_without_jax_is_one_line(add_file, monkeypatch):
    from hlo_run.backends.xla_cpu import XlaCpuBackend

    monkeypatch.setattr(XlaCpuBackend, "unavailable_reason", classmethod(lambda cls: "it needs jax"))
    result = run(["--platform", "interpreter", "--reference-platform", "xla-cpu", str(add_file)])
    assert result.exit_code == 1
    assert "hlo-run: error: " in result.stderr
    assert "platform 'xla-cpu' cannot run here: it needs jax" in result.stderr


def test_xla_cpu_rejects_tuple_parameters_cleanly(tmp_path):
    pytest.importorskip("jax")
    module = tmp_path / "t.hlo"
    module.write_text("ENTRY e { p = (f32[2]) parameter(0) ROOT g = f32[2] get-tuple-element(p), index=0 }")
    result = run(["--platform", "interpreter", "--reference-platform", "xla-cpu", str(module)])
    assert result.exit_code == 1 and "XLA:CPU cannot take the tuple-shaped entry parameter 0" in result.stderr


def test_parse_error_names_file_line_col_with_caret(tmp_path):
    module = tmp_path / "bad.hlo"
    module.write_text("ENTRY e {\n  p = f32[2] parameter(0)\n  ROOT x = f32[2] addd(p)\n}\n")
    result = run(["--platform", "interpreter", str(module)])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == f"hlo-run: error: {module}:3:19: unknown opcode 'addd'"
    assert lines[2].strip() == "^" and "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["nope.hlo"], "cannot read 'nope.hlo': no such file"),
    (["--inputs", "missing.npz", "ADD"], "cannot read 'missing.npz': no such file"),
    (["--platform", "cuda", "ADD"], "platform 'cuda' cannot run here: no GPU in this test"),
    (["--platform", "host", "ADD"], "platform 'host' is not available yet"),
])
def test_user_errors_exit_1_with_one_line(add_file, args, message, monkeypatch):
    from hlo_run import backends

    # the same answers on every machine: no usable GPU, no host backend registered
    monkeypatch.delitem(backends.BACKENDS, "host", raising=False)
    if "cuda" in backends.BACKENDS:
        cuda = backends.backend_class("cuda")
        monkeypatch.setattr(cuda, "unavailable_reason", classmethod(lambda cls: "no GPU in this test"))
    args = [str(add_file) if a == "ADD" else a for a in args]
    result = run(args)
    assert result.exit_code == 1
    assert result.stderr.startswith("hlo-run: error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_wrong_npz_array_names_the_array(tmp_path, add_file):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, arg0=np.zeros(5, np.float32))
    result = run(["--platform", "interpreter", "--inputs", str(inputs), str(add_file)])
    assert result.exit_code == 1 and "array 'arg0' has shape [5], expected [4]" in result.stderr


@pytest.mark.parametrize("args", [["--platform", "tpu"], ["--no-such-flag"], ["--iterations", "0"],
                                  ["--seed", "x"], ["a.hlo", "b.hlo"]])
def test_usage_errors_exit_2(add_file, args):
    assert run(args + [str(add_file)]).exit_code == 2


def test_iterations_report_times(add_file):
    result = run(["--platform", "interpreter", "--iterations", "3", str(add_file)])
    assert result.exit_code == 0 and "interpreter: 3 runs: min" in result.stderr


def test_split_input_file_runs_every_module(tmp_path):
    module = tmp_path / "two.hlo"
    module.write_text(ADD + "// -----\n" + BF16)
    result = run(["--platform", "interpreter", "--split-input-file", "--print-literals", str(module)])
    assert result.exit_code == 0, result.stderr
    assert f"** Running {module}#0 **" in result.stdout and f"** Running {module}#1 **" in result.stdout
    assert result.stdout.count("** Result **") == 2
    result = run(["--platform", "interpreter", "--split-input-file", "--output", "o.npz", str(module)])
    assert result.exit_code == 2


def test_debug_shows_the_traceback(tmp_path):
    module = tmp_path / "bad.hlo"
    module.write_text("ENTRY e { ROOT x = f32[] addd() }")
    result = run(["--platform", "interpreter", "--debug", str(module)])
    assert result.exit_code == 1 and "Traceback" in result.stderr


def test_console_script_has_no_traceback(tmp_path):
    module = tmp_path / "bad.hlo"
    module.write_text("ENTRY e { ROOT x = f32[] addd() }")
    proc = subprocess.run([sys.executable, "-m", "hlo_run.cli", "--platform", "interpreter", str(module)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"hlo-run: error: {module}:1:") and "Traceback" not in proc.stderr


def test_bf16_literals_print_in_their_own_precision(tmp_path):
    module = tmp_path / "halve.hlo"
    module.write_text(BF16)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, arg0=np.array([1.00390625, 3, -0.1], np.float32))  # round to bf16 on load
    result = run(["--platform", "interpreter", "--inputs", str(inputs), "--print-literals", str(module)])
    assert result.exit_code == 0, result.stderr
    want = np.array([1.00390625, 3, -0.1], np.float32).astype(ml_dtypes.bfloat16)
    assert float(want[0]) == 1.0
    assert result.stdout.splitlines()[1].startswith("bf16[3] {1, 3, -0.1")


def test_streamed_literals_equal_the_whole_literal(tmp_path):
    from hlo_common.hlo.literal import format_literal
    from hlo_common.hlo.shape import Shape

    module = tmp_path / "m.hlo"
    module.write_text("ENTRY e { p = s32[3,2,2] parameter(0) ROOT n = s32[3,2,2] negate(p) }")
    inputs = tmp_path / "in.npz"
    arg = np.arange(12, dtype=np.int32).reshape(3, 2, 2)
    np.savez(inputs, arg0=arg)
    result = run(["--platform", "interpreter", "--inputs", str(inputs), "--print-literals", str(module)])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    s32 = Shape.array("s32", (3, 2, 2)).element_type
    assert lines[1] == "s32[3,2,2] " + format_literal(arg, s32)
    assert lines[3] == "s32[3,2,2] " + format_literal(-arg, s32)
