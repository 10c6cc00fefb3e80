"""`hlo-opt` command line: input/output, flags, dumps, and every error path (one line, exit code,
no traceback, nothing half-written). Most cases run `main()` in-process; a few run the installed
script to see the real exit status and stderr."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo.shape import Shape
from hlo_opt import cli, pipelines
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY, HloPass
from hlo_common.hlo.verifier import verify_module

HLO_OPT = Path(sys.executable).with_name("hlo-opt")

DUPLICATES = """HloModule dup
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] add(p, p)
  b = f32[4] add(p, p)
  ROOT n = f32[4] multiply(a, b)
}
"""


def run(args: list[str], capsys, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    try:
        cli.main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, pattern: str, expected_code: int = 1) -> None:
    assert code == expected_code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert re.match(r"hlo-opt: error: " + pattern, lines[0]), lines[0]


@pytest.fixture
def hlo_file(tmp_path) -> Path:
    path = tmp_path / "dup.hlo"
    path.write_text(DUPLICATES)
    return path


# -- normal operation --------------------------------------------------------------------------
def test_file_in_optimized_text_out(hlo_file, capsys):
    code, out, err = run([str(hlo_file)], capsys)
    assert code == 0, err
    assert out.count(" add(") == 1
    assert print_module(parse_module(out)) == out


def test_stdin_in_and_pipeline_none_prints_the_canonical_input(capsys, monkeypatch):
    code, out, _ = run(["--pipeline", "none"], capsys, stdin=DUPLICATES, monkeypatch=monkeypatch)
    assert code == 0
    assert out == print_module(parse_module(DUPLICATES))
    code, out2, _ = run(["-", "--pipeline", "none"], capsys, stdin=DUPLICATES, monkeypatch=monkeypatch)
    assert out2 == out


def test_passes_run_exactly_the_named_passes(hlo_file, capsys):
    code, out, _ = run([str(hlo_file), "--passes", "dce"], capsys)
    assert code == 0 and out.count(" add(") == 2
    code, out, _ = run([str(hlo_file), "--passes", "cse,dce"], capsys)
    assert code == 0 and out.count(" add(") == 1


def test_disable_pass_skips_it_in_the_gpu_pipeline(hlo_file, capsys):
    code, out, _ = run([str(hlo_file), "--disable-pass", "cse"], capsys)
    assert code == 0 and out.count(" add(") == 2


def test_output_file_is_written_whole(hlo_file, tmp_path, capsys):
    target = tmp_path / "out.hlo"
    code, out, _ = run([str(hlo_file), "-o", str(target)], capsys)
    assert code == 0 and out == ""
    assert target.read_text().count(" add(") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup.hlo", "out.hlo"]


def test_split_input_file_numbers_modules_in_input_order(tmp_path, capsys):
    src = tmp_path / "two.hlo"
    src.write_text(DUPLICATES + "\n// -----\n\n" + DUPLICATES.replace("HloModule dup", "HloModule second"))
    dumps = tmp_path / "dumps"
    code, out, err = run([str(src), "--split-input-file", "--dump-to", str(dumps)], capsys)
    assert code == 0, err
    assert [parse_module(t).name for t in out.split("// -----")] == ["dup", "second"]
    assert sorted(p.name for p in dumps.iterdir()) == [
        "module_0000.dup.after_optimizations.txt", "module_0000.dup.before_optimizations.txt",
        "module_0001.second.after_optimizations.txt", "module_0001.second.before_optimizations.txt"]
    assert (dumps / "module_0000.dup.before_optimizations.txt").read_text() == \
        print_module(parse_module(DUPLICATES))


def test_dump_pass_re_names_pipelines_and_passes_as_xla(hlo_file, tmp_path, capsys):
    dumps = tmp_path / "d"
    code, _, err = run([str(hlo_file), "--dump-to", str(dumps), "--dump-pass-re", "cse",
                        "--dump-format", "text", "--dump-format", "html"], capsys)
    assert code == 0, err
    names = sorted(p.name for p in dumps.iterdir())
    # The pass in front of cse in `simplification` depends on which passes exist by now.
    assert any(re.fullmatch(r"module_0000\.dup\.0000\.simplification\.after_[\w-]+\.before_cse\.txt", n)
               for n in names), names
    assert "module_0000.dup.0001.simplification.after_cse.before_dce.txt" in names
    assert "module_0000.dup.0001.simplification.after_cse.before_dce.html" in names
    assert "module_0000.dup.after_optimizations.html" in names
    steps = sorted({n.split(".")[2] for n in names if n.split(".")[2].isdigit()})
    assert steps == [f"{i:04d}" for i in range(len(steps))]


def test_list_passes(capsys):
    code, out, _ = run(["--list-passes"], capsys)
    assert code == 0
    assert "dce " in out and "(planned)" in out


def test_time_passes_prints_a_table_on_stderr(hlo_file, capsys):
    code, out, err = run([str(hlo_file), "--time-passes"], capsys)
    assert code == 0 and out.count(" add(") == 1
    for word in ("pass", "pipeline", "time (ms)", "changed", "cse", "simplification", "total"):
        assert word in err


def test_device_names_and_files(hlo_file, tmp_path, capsys):
    for name in ("h100", "H200", "a100"):
        assert run([str(hlo_file), "--device", name], capsys)[0] == 0
    good = tmp_path / "dev.json"
    good.write_text(json.dumps({"name": "test gpu", "core_count": 10, "clock_rate_ghz": 1.5}))
    assert run([str(hlo_file), "--device", str(good)], capsys)[0] == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "core_count": -1}))
    code, _, err = run([str(hlo_file), "--device", str(bad)], capsys)
    assert_one_line_error(code, err, r".*bad.json: device field 'core_count' must be a positive integer")
    code, _, err = run([str(hlo_file), "--device", "v100"], capsys)
    assert_one_line_error(code, err, r"unknown device 'v100'")


# -- errors ------------------------------------------------------------------------------------
def test_unknown_pass_name_lists_close_matches(hlo_file, tmp_path, capsys):
    target = tmp_path / "never.hlo"
    code, out, err = run([str(hlo_file), "--passes", "dce,cs", "-o", str(target)], capsys)
    assert_one_line_error(code, err, r"unknown pass 'cs'; did you mean 'cse'")
    assert out == "" and not target.exists()
    planned = next(n for n in sorted(pipelines.PLANNED_PASSES) if n not in PASS_REGISTRY)
    code, _, err = run([str(hlo_file), "--passes", planned], capsys)
    assert_one_line_error(code, err, rf"pass '{planned}' is planned but not implemented yet")
    code, _, err = run([str(hlo_file), "--disable-pass", "simplificaton"], capsys)
    assert_one_line_error(code, err,
                          r"unknown pass or pipeline 'simplificaton'; did you mean 'simplification'")


def test_unwritable_dump_directory(hlo_file, tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    target = tmp_path / "out.hlo"
    target.write_text("old")
    code, out, err = run([str(hlo_file), "--dump-to", str(blocker / "d"), "-o", str(target)], capsys)
    assert_one_line_error(code, err, r"cannot write dumps to '.*blocker/d'")
    assert target.read_text() == "old"


def test_unreadable_input_and_parse_errors(tmp_path, capsys):
    code, _, err = run([str(tmp_path / "missing.hlo")], capsys)
    assert_one_line_error(code, err, r"cannot read '.*missing.hlo'")
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[] addd()\n}\n")
    code, _, err = run([str(bad)], capsys)
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"hlo-opt: error: {bad}:3:")


def test_usage_errors_exit_2(hlo_file, capsys):
    code, _, err = run([str(hlo_file), "--bogus"], capsys)
    assert_one_line_error(code, err, r".*--bogus", expected_code=2)
    code, _, err = run([str(hlo_file), "--dump-format", "svg"], capsys)
    assert_one_line_error(code, err, r".*svg", expected_code=2)


class Breaker(HloPass):
    """Test-only: leaves the root with a shape that does not match its operands."""

    name = "test-breaker"

    def run(self, module: HloModule) -> bool:
        module.entry.root.shape = Shape.array("f32", (7,))
        return True


class Spinner(HloPass):
    """Test-only: claims a change every time."""

    name = "test-spinner"

    def run(self, module: HloModule) -> bool:
        return True


class Crasher(HloPass):
    name = "test-crasher"

    def run(self, module: HloModule) -> bool:
        return {}["missing"]


@pytest.fixture
def test_passes(monkeypatch):
    for cls in (Breaker, Spinner, Crasher):
        monkeypatch.setitem(PASS_REGISTRY, cls.name, cls)


def test_verification_failure_before_a_pass(tmp_path, capsys):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[3] negate(p)\n}\n")
    code, _, err = run([str(bad), "--passes", "dce"], capsys)
    assert_one_line_error(code, err,  # the place of the parsed instruction comes first
                          re.escape(str(bad)) + r":4:8: verification failed before pass 'dce' "
                          r"\(pipeline 'transforms_pipeline'\): .*instruction %n")


def test_verification_failure_after_a_pass(hlo_file, tmp_path, capsys, test_passes):
    target = tmp_path / "out.hlo"
    args = [str(hlo_file), "--passes", "dce,test-breaker,cse", "--verify-each", "-o", str(target)]
    code, _, err = run(args, capsys)
    assert_one_line_error(code, err,
                          r"\S+:\d+:\d+: verification failed after pass 'test-breaker' "
                          r"\(pipeline 'transforms_pipeline'\)")
    assert not target.exists()
    code, _, err = run([str(hlo_file), "--passes", "test-breaker"], capsys)
    assert_one_line_error(code, err,
                          r"\S+:\d+:\d+: verification failed after pipeline 'transforms_pipeline' "
                          r"\(rerun with --verify-each")


def test_non_convergence(hlo_file, capsys, test_passes, monkeypatch):
    spec = pipelines.pipe("spinning", pipelines.fix(pipelines.p("test-spinner")))
    monkeypatch.setattr(pipelines, "GPU_PIPELINES", (spec,))
    code, _, err = run([str(hlo_file)], capsys)
    assert_one_line_error(code, err, r"pass 'test-spinner' did not reach a fixed point")


def test_a_crashing_pass_is_one_line_unless_debug(hlo_file, capsys, test_passes):
    code, _, err = run([str(hlo_file), "--passes", "test-crasher"], capsys)
    assert_one_line_error(code, err,
                          r"pass 'test-crasher' \(pipeline 'transforms_pipeline'\) failed: KeyError")
    code, _, err = run([str(hlo_file), "--passes", "test-crasher", "--debug"], capsys)
    assert code == 1 and "Traceback" in err and err.strip().endswith("failed: KeyError: 'missing'")


def test_the_installed_script_exits_1_without_a_traceback(hlo_file):
    proc = subprocess.run([str(HLO_OPT), str(hlo_file), "--passes", "nope"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr == "hlo-opt: error: unknown pass 'nope' (see --list-passes)\n"
    assert proc.stdout == ""


# -- determinism -------------------------------------------------------------------------------
def _corpus_sample() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "helpers"))
    from corpus_lib import corpus_modules, require_corpus

    require_corpus()
    chosen = []
    for mid, text in corpus_modules():
        if len(text) > 6000 or "is_scheduled=true" in text:
            continue
        if not any(k in text for k in ("call(", "fusion(", "while(", "tuple(")):
            continue
        try:
            m = parse_module(text, mid)
            verify_module(m)
        except Exception:
            continue
        chosen.append(text)
        if len(chosen) == 4:
            break
    return "\n// -----\n".join(chosen)


def test_output_and_dumps_are_byte_identical_across_hash_seeds(tmp_path):
    src = tmp_path / "sample.hlo"
    src.write_text(_corpus_sample())
    results = []
    for seed in ("0", "4242"):
        dumps = tmp_path / f"dumps{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([str(HLO_OPT), str(src), "--split-input-file", "--dump-to", str(dumps),
                               "--dump-pass-re", ".*", "--dump-format", "text", "--dump-format", "dot",
                               "--dump-format", "html"], capture_output=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        files = {p.name: p.read_bytes() for p in sorted(dumps.iterdir())}
        results.append((proc.stdout, files))
    (out0, files0), (out1, files1) = results
    assert out0 and out0 == out1
    assert len(files0) > 12 and files0.keys() == files1.keys()
    assert [n for n in files0 if files0[n] != files1[n]] == []


S32_CONV = """HloModule s32conv
ENTRY e {
  x = s8[2,6,6,8] parameter(0)
  w = s8[3,3,8,8] parameter(1)
  ROOT c = s32[2,6,6,8] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""


def test_verbose_says_once_that_a_convolution_cudnn_cannot_take_stays_ours(tmp_path, capsys):
    path = tmp_path / "s32.hlo"
    path.write_text(S32_CONV)
    code, out, err = run([str(path), "--verbose"], capsys)
    assert code == 0
    notes = [line for line in err.splitlines() if line.startswith("hlo-opt: note:")]
    assert len(notes) == 1 and "s8, s8 -> s32" in notes[0] and "stays a convolution of ours" in notes[0]
    assert " convolution(" in out and "__cudnn$conv" not in out
    code, out2, err = run([str(path)], capsys)
    assert code == 0 and err == "" and out2 == out  # quiet without --verbose, the same module


@pytest.mark.parametrize("config, message", [
    ('{"cudnn_conv_backend_config":{"activation_mode":"kBogus"}}', "activation_mode 'kBogus' is not one of"),
    ('{"cudnn_conv_backend_config":{"conv_result_scale":"abc"}}', "bad cudnn_conv_backend_config"),
    ('{"cudnn_conv_backend_config":[1,2]}', "backend_config is not a CudnnConvBackendConfig"),
])
def test_a_malformed_cudnn_backend_config_is_one_line_naming_the_call(tmp_path, capsys, config, message):
    path = tmp_path / "bad.hlo"
    path.write_text(f"""HloModule bad
ENTRY e {{
  x = f32[2,6,6,8] parameter(0)
  w = f32[8,3,3,8] parameter(1)
  call = (f32[2,6,6,8], u8[0]) custom-call(x, w), window={{size=3x3 pad=1_1x1_1}},
    dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convForward", backend_config={config}
  ROOT g = f32[2,6,6,8] get-tuple-element(call), index=0
}}
""")
    code, out, err = run([str(path)], capsys)
    assert_one_line_error(code, err, r"%call \(custom-call\) in computation e: " + re.escape(message))
    assert out == ""
