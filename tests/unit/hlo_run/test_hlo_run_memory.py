"""hlo-run checks sizes before it allocates (issue 22 item 5): a parameter or an --inputs array
too big for the memory it may use is one line naming the parameter (or the file and the array),
exit 1, where it was "internal error: MemoryError" naming nothing; .npz headers are read and
compared with the parameters before any data; random inputs are made in their own type, never
through a float64 array twice their size."""

from __future__ import annotations

import io
import tracemalloc
import zipfile

import pytest
from click.testing import CliRunner

from hlo_common.hlo.parser import parse_module
from hlo_run.memory_budget import ENV_LIMIT, bytes_text
from hlo_run.inputs import make_fake_arguments

BIG = 100_000_000_000  # 100 billion f32: 373 GiB


def _module(tmp_path, shape: str, n_params: int = 1):
    params = "\n".join(f"  p{i} = {shape} parameter({i})" for i in range(n_params))
    path = tmp_path / "m.hlo"
    path.write_text(f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {shape} negate(p0)\n}}\n")
    return path


def _run(args):
    from hlo_run.cli import cli

    return CliRunner().invoke(cli, ["--platform", "interpreter", *args])


def _one_line(result) -> str:
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def _npy_member(shape: tuple, dtype: str, data: bytes) -> bytes:
    from numpy.lib import format as npy

    out = io.BytesIO()
    npy.write_array_header_1_0(out, {"descr": dtype, "fortran_order": False, "shape": shape})
    return out.getvalue() + data


def _npz(tmp_path, members: dict[str, bytes], name: str = "in.npz"):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as z:
        for member, data in members.items():
            z.writestr(member + ".npy", data)
    return path


def test_huge_parameter_is_refused_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_LIMIT, str(1 << 30))
    err = _one_line(_run([str(_module(tmp_path, f"f32[{BIG}]"))]))
    assert err.startswith(f"hlo-run: error: parameter 0 (f32[{BIG}]) needs 373 GiB, more than the ")


def test_parameters_are_counted_together(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_LIMIT, "10000")  # one or two f32[1000] fit, three do not
    err = _one_line(_run([str(_module(tmp_path, "f32[1000]", n_params=3))]))
    assert err == ("hlo-run: error: parameters 0..2 together need 11.7 KiB, more than the 9.77 KiB of "
                   "memory available\n")


def test_npz_header_is_checked_before_its_data(tmp_path, monkeypatch):
    # the header claims 373 GiB; the data is 16 bytes. It used to be allocated before the shape check.
    path = _npz(tmp_path, {"arg0": _npy_member((BIG,), "<f4", bytes(16))})
    err = _one_line(_run(["--inputs", str(path), str(_module(tmp_path, "f32[4]"))]))
    assert err == f"hlo-run: error: {path}: array 'arg0' has shape [{BIG}], expected [4] for f32[4]\n"


def test_npz_array_too_big_for_memory_names_file_and_array(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_LIMIT, str(1 << 30))
    path = _npz(tmp_path, {"arg0": _npy_member((BIG,), "<f4", bytes(16))})
    err = _one_line(_run(["--inputs", str(path), str(_module(tmp_path, f"f32[{BIG}]"))]))
    # the stored array and its converted copy: 2 x 373 GiB
    assert err.startswith(f"hlo-run: error: {path}: array 'arg0' (f32[{BIG}]) needs 745 GiB, more than the ")


def test_npz_truncated_member_data_names_the_array(tmp_path):
    path = _npz(tmp_path, {"arg0": _npy_member((4,), "<f4", bytes(8))})  # 2 of 4 values
    err = _one_line(_run(["--inputs", str(path), str(_module(tmp_path, "f32[4]"))]))
    assert err.startswith(f"hlo-run: error: {path}: array 'arg0' cannot be read (")


def test_encrypted_npz_member_is_one_line(tmp_path):
    path = _npz(tmp_path, {"arg0": _npy_member((4,), "<f4", bytes(16))})
    raw = bytearray(path.read_bytes())
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local and central headers
        at = raw.find(sig)
        raw[at + flag_at] |= 1  # general purpose flag bit 0: encrypted
    path.write_bytes(bytes(raw))
    err = _one_line(_run(["--inputs", str(path), str(_module(tmp_path, "f32[4]"))]))
    assert err.startswith(f"hlo-run: error: {path}: array 'arg0' cannot be read (")
    assert "encrypted" in err


def test_duplicate_npz_member_is_refused(tmp_path):
    member = _npy_member((4,), "<f4", bytes(16))
    path = tmp_path / "dup.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("arg0.npy", member)
        z.writestr("arg0", member)
    err = _one_line(_run(["--inputs", str(path), str(_module(tmp_path, "f32[4]"))]))
    assert err == f"hlo-run: error: {path}: array 'arg0' is in the archive twice\n"


@pytest.mark.parametrize("ty", ["f32", "bf16", "s8", "c64"])
def test_random_inputs_are_made_in_their_own_type(ty):
    n = 4 << 20
    module = parse_module(f"HloModule m\nENTRY e {{ ROOT p = {ty}[{n}] parameter(0) }}\n", "m")
    tracemalloc.start()
    try:
        (value,) = make_fake_arguments(module, seed=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the result plus one chunk (2^20 values) of float64/int64 draws and its rounding (complex:
    # two parts, a complex128 sum); it used to be the result plus float64 arrays of all n values:
    # 32 MiB more for f32, 128 MiB more for c64
    slack = (48 if ty == "c64" else 24) << 20
    assert peak < value.nbytes + slack, bytes_text(peak)
    assert value.dtype.itemsize * n == value.nbytes


def test_memory_budget_reads_the_environment(monkeypatch):
    from hlo_run.memory_budget import available_bytes, check_fits
    from hlo_common.errors import InputError

    monkeypatch.setenv(ENV_LIMIT, "1000")
    assert available_bytes() <= 1000
    check_fits(1000, "x")
    with pytest.raises(InputError, match=r"^x needs 1001 B, more than the 1000 B of memory available$"):
        check_fits(1001, "x")
