"""StableHLO / MHLO input (hlo_common.proto.mlir_input through hlo_common.source.read_input and the
CLIs' --input_format): JAX programs lowered at test time (jax is a test-only dependency) as MLIR
text (`.as_text()`) and bytecode (`.compiler_ir("stablehlo")` serialized) run through hlo-run to
jax's own result; detection by extension and content; a bad module is one line naming the file;
and without jaxlib the input is refused naming the extra to install."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from hlo_common.errors import InputError
from hlo_common.source import detect_format, read_input

jax = pytest.importorskip("jax", reason="jax lowers the StableHLO these tests read")
jnp = pytest.importorskip("jax.numpy")

FUNCTIONS = {
    "tanh_matmul": (lambda x, y: jnp.tanh(x @ y).sum(axis=0),
                    [np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3),
                     np.linspace(0.5, -2, 6, dtype=np.float32).reshape(3, 2)]),
    "softmax_bf16": (lambda x: jax.nn.softmax(x.astype(jnp.bfloat16), axis=-1),
                     [np.arange(16, dtype=np.float32).reshape(2, 8) / 7]),
    "cumsum_where": (lambda x, n: jnp.where(jnp.cumsum(x) > n, x, -x),
                     [np.arange(10, dtype=np.int32) - 3, np.int32(4)]),
}


def _write(tmp_path, name: str, form: str):
    from jax._src.interpreters import mlir as jax_mlir

    fn, args = FUNCTIONS[name]
    lowered = jax.jit(fn).lower(*args)
    if form == "text":
        path = tmp_path / f"{name}.mlir"
        path.write_text(lowered.as_text())
    else:
        path = tmp_path / f"{name}.mlirbc"
        path.write_bytes(jax_mlir.module_to_bytecode(lowered.compiler_ir("stablehlo")))
    return path, fn, args


def _run(*args: str, rc: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == rc, proc.stderr[-2000:]
    return proc


@pytest.mark.parametrize("form", ["text", "bytecode"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_hlo_run_gives_jax_s_result_for_stablehlo(tmp_path, name, form) -> None:
    path, fn, args = _write(tmp_path, name, form)
    inputs, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{f"arg{k}": np.asarray(a) for k, a in enumerate(args)})
    _run("hlo_run.cli", "--platform", "interpreter", "--inputs", str(inputs), "--output", str(out), str(path))
    expected = np.asarray(jax.jit(fn)(*args)).astype(np.float64)
    with np.load(out) as data:
        got = data["out0"].astype(np.float64)
    np.testing.assert_allclose(got, expected, rtol=1e-2 if "bf16" in name else 1e-5, atol=1e-6)


def test_detection_by_name_and_content(tmp_path) -> None:
    text, _, _ = _write(tmp_path, "tanh_matmul", "text")
    code, _, _ = _write(tmp_path, "tanh_matmul", "bytecode")
    assert detect_format("x.mlir", b"") == detect_format("x.mlirbc", b"") == "stablehlo"
    assert detect_format("stdin", text.read_bytes()) == "stablehlo"
    assert detect_format("stdin", code.read_bytes()) == "stablehlo"
    assert detect_format("lowered.txt", text.read_bytes()) == "stablehlo"
    assert detect_format("dump.txt", b"HloModule m\n") == "hlo"
    with code.open("rb") as f:  # stdin, detected from its first bytes
        got = read_input("-", stdin=f)
    assert got.format == "stablehlo" and "tanh(" in got.text


def test_mhlo_text_reads_through_the_same_converter(tmp_path) -> None:
    path = tmp_path / "m.mlir"
    path.write_text("func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n"
                    "  %0 = mhlo.sine %arg0 : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n")
    out = _run("hlo_opt.cli", "--pipeline", "none", "--input_format=mhlo", str(path)).stdout
    assert "sine(%Arg_0.1)" in out
    assert read_input(path, "mhlo").format == "mhlo"


def test_shardings_survive_the_conversion(tmp_path) -> None:
    """A sharding annotation in the StableHLO (mhlo.sharding, as jax writes it) reaches the IR as
    XLA's converter keeps it, an instruction sharding."""
    path = tmp_path / "s.mlir"
    path.write_text('func.func @main(%arg0: tensor<8xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}) -> tensor<8xf32> {\n'
                    '  %0 = stablehlo.negate %arg0 : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n')
    text = read_input(path).text
    assert "sharding={devices=[2]<=[2]}" in text


def test_bad_stablehlo_is_one_line_naming_the_file(tmp_path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text("module {\n  func.func @main( {\n")
    proc = _run("hlo_run.cli", "--platform", "interpreter", str(path), rc=1)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hlo-run: error: {path}:2:") and "Traceback" not in proc.stderr


def test_without_jaxlib_the_error_names_the_extra(tmp_path, monkeypatch) -> None:
    path, _, _ = _write(tmp_path, "tanh_matmul", "text")
    monkeypatch.setitem(sys.modules, "jax._src.lib", None)  # import fails as where jaxlib is absent
    with pytest.raises(InputError, match=r"hlo-toolchain\[stablehlo\]"):
        read_input(path)


def test_shardy_attributes_survive_as_xla_keeps_them(tmp_path) -> None:
    """jax lowers shardings with Shardy (`sdy.mesh`, `sdy.sharding`); XLA's converter keeps them as
    frontend attributes (`xla.sdy.meshes` on the module, `xla.sdy.sharding` per value), and so does
    the IR, which runs, and writes them back to a proto unchanged."""
    import proto_lib
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    fn = jax.jit(lambda a: jnp.sin(a) * 2, in_shardings=NamedSharding(mesh, PartitionSpec("x")))
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(8, 4)
    path = tmp_path / "sdy.mlir"
    path.write_text(fn.lower(x).as_text())
    assert "sdy.sharding" in path.read_text()
    text = read_input(path).text
    assert "frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=1]>}}" in text
    assert 'xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"x\\"}, {}]>"' in text
    expected, got = proto_lib.written_and_read(text, "sdy")
    assert got == expected
    inputs, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, arg0=x)
    _run("hlo_run.cli", "--platform", "interpreter", "--inputs", str(inputs), "--output", str(out), str(path))
    with np.load(out) as data:
        np.testing.assert_allclose(data["out0"], np.asarray(fn(x)), rtol=1e-6)
