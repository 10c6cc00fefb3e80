"""Input errors a person can act on, on all three tools: a missing file, a directory, text that is not
UTF-8 (file:line:col of the first bad byte) and, for hlo-run, every way an --inputs .npz can be wrong:
one line `<tool>: error: ...`, exit status 1, no traceback."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from hlo_common.source import byte_position

ADD = "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT a = f32[4] add(p, p)\n}\n"


def _commands():
    from hlo_codegen.cli import cli as codegen
    from hlo_opt.cli import hlo_opt_command
    from hlo_run.cli import cli as run

    return {"hlo-opt": (hlo_opt_command, []), "hlo-codegen": (codegen, ["--target", "host"]),
            "hlo-run": (run, ["--platform", "interpreter"])}


TOOLS = ("hlo-opt", "hlo-codegen", "hlo-run")


def invoke(tool: str, args: list[str]):
    command, base = _commands()[tool]
    return CliRunner().invoke(command, base + args)


def assert_one_line(result, tool: str, message: str) -> None:
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert result.stderr == f"{tool}: error: {message}\n"


@pytest.mark.parametrize("tool", TOOLS)
def test_missing_file(tool, tmp_path):
    path = tmp_path / "nope.hlo"
    assert_one_line(invoke(tool, [str(path)]), tool, f"cannot read '{path}': no such file")


@pytest.mark.parametrize("tool", TOOLS)
def test_directory(tool, tmp_path):
    assert_one_line(invoke(tool, [str(tmp_path)]), tool, f"cannot read '{tmp_path}': it is a directory")


@pytest.mark.parametrize("tool", TOOLS)
def test_not_utf8_names_line_and_column(tool, tmp_path):
    path = tmp_path / "latin1.hlo"
    # line 3: 32 characters ('  p = f32[4] parameter(0) // caf'), then an e-acute in Latin-1 (0xe9)
    path.write_bytes(ADD.replace("parameter(0)", "parameter(0) // caf\xe9").encode("latin-1"))
    message = (f"{path}:3:33: not UTF-8 text: byte 0xe9 (invalid continuation byte; byte offset "
               f"{path.read_bytes().index(bytes([0xE9]))})")
    assert_one_line(invoke(tool, [str(path)]), tool, message)


def test_byte_position_counts_characters_on_the_line():
    data = "ab\ncé\xff".encode("utf-8")
    assert byte_position(data, data.index(b"\xc3\xbf")) == (2, 3)  # after 'c' and 'é'
    assert byte_position(b"\xff", 0) == (1, 1)
    assert byte_position(b"x\n\n\xff", 3) == (3, 1)


# -- hlo-run --inputs -----------------------------------------------------------------------------
@pytest.fixture
def module(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(ADD)
    return path


def _npz(tmp_path, **arrays):
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("make, message", [
    (lambda d: _npz(d, x=np.zeros(4, np.float32)), "{p}: unexpected array 'x' (the module takes arg0)"),
    (lambda d: _npz(d), "{p}: missing array 'arg0' (f32[4])"),
    (lambda d: _npz(d, arg0=np.zeros((2, 2), np.float32)),
     "{p}: array 'arg0' has shape [2, 2], expected [4] for f32[4]"),
    (lambda d: _npz(d, arg0=np.zeros(4, np.int32)),
     "{p}: array 'arg0' has dtype int32, expected float32 for f32[4]"),
    (lambda d: _npz(d, arg0=np.array([1, "a"], dtype=object)),
     "{p}: holds object (pickled) arrays; only numeric arrays are read"),
])
def test_npz_with_wrong_contents(module, tmp_path, make, message):
    path = make(tmp_path)
    result = invoke("hlo-run", ["--inputs", str(path), str(module)])
    assert_one_line(result, "hlo-run", message.format(p=path))


def test_unreadable_npz_files(module, tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not an archive")
    assert_one_line(invoke("hlo-run", ["--inputs", str(garbage), str(module)]), "hlo-run",
                    f"{garbage}: not an .npz file (no zip archive inside; save with numpy.savez)")
    npy = tmp_path / "one.npy"
    np.save(npy, np.zeros(4, np.float32))
    assert_one_line(invoke("hlo-run", ["--inputs", str(npy), str(module)]), "hlo-run",
                    f"{npy}: a single .npy array, not an .npz archive (save with numpy.savez)")
    truncated = tmp_path / "cut.npz"
    truncated.write_bytes(_npz(tmp_path, arg0=np.zeros(4, np.float32)).read_bytes()[:60])
    result = invoke("hlo-run", ["--inputs", str(truncated), str(module)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"hlo-run: error: {truncated}: not a readable .npz")
    assert result.stderr.count("\n") == 1
    missing = tmp_path / "none.npz"
    assert_one_line(invoke("hlo-run", ["--inputs", str(missing), str(module)]), "hlo-run",
                    f"cannot read '{missing}': no such file")
    assert_one_line(invoke("hlo-run", ["--inputs", str(tmp_path), str(module)]), "hlo-run",
                    f"cannot read '{tmp_path}': it is a directory")


def test_bf16_inputs_stored_as_float32_are_accepted(tmp_path):
    path = tmp_path / "h.hlo"
    path.write_text(ADD.replace("f32", "bf16"))
    npz = _npz(tmp_path, arg0=np.float32([1, 2, 3, 4]))
    result = invoke("hlo-run", ["--inputs", str(npz), "--print-literals", str(path)])
    assert result.exit_code == 0, result.stderr
    assert "bf16[4] {2, 4, 6, 8}" in result.stdout
    assert ml_dtypes.bfloat16  # the type the values are converted to
