"""The SPMD path through the tools (issue 17 items 4 and 8): `hlo-opt --num-partitions N`
partitions jax's HLO in its gpu pipeline; `hlo-run pre.hlo --num-partitions N` takes and gives
global arrays on the interpreter and on the host over MPI, matching XLA:CPU's recorded results;
bad input is one line naming the instruction, exit status 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from spmd_testlib import DATA

BIN = Path(sys.executable).parent


def _tool(tool: str, *args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *args], input=stdin, capture_output=True, text=True, timeout=timeout)


def _one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_hlo_opt_partitions_megatron_mlp_in_the_gpu_pipeline():
    proc = _tool("hlo-opt", "--num_partitions=4", str(DATA / "megatron_mlp_n4.hlo"))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    header = text.splitlines()[0]
    assert "num_partitions=4" in header
    # per-device parameters: x replicated, w1 column- and w2 row-split 4 ways
    assert "entry_computation_layout={(f32[8,16]{1,0}, f32[16,8]{1,0}, f32[8,16]{1,0})->f32[8,16]{1,0}}" in header
    # column then row parallel: two local GEMMs and one all-reduce of the partial sums (asynchronous,
    # as XLA:GPU's async-collective-creator makes it), nothing else (a GEMM is a cuBLAS call or,
    # with Triton GEMMs on as by default, a Triton GEMM fusion)
    gemms = text.count("__cublas$lt$matmul\"") + text.count('"kind":"__triton_nested_gemm_fusion"')
    assert text.count("all-reduce-start(") == text.count("all-reduce-done(") == 1 and gemms == 2
    for op in ("all-reduce(", "all-gather", "all-to-all(", "collective-permute", "dynamic-slice("):
        assert op not in text


def test_hlo_opt_without_num_partitions_only_removes_the_markers():
    proc = _tool("hlo-opt", "--passes", "sdy-round-trip-import,sharding-remover,sharding-propagation,"
                 "spmd-partitioning,dce", str(DATA / "contracting_dot_n4.hlo"))
    assert proc.returncode == 0, proc.stderr
    assert "all-reduce(" not in proc.stdout and "custom-call(" not in proc.stdout
    assert "f32[6,16]" in proc.stdout  # global shapes


def _global_run(name: str, tmp_path: Path, platform: str, n: int) -> None:
    data = np.load(DATA / f"{name}.npz")
    inputs, output = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{k: data[k] for k in data.files if k.startswith("arg")})
    proc = _tool("hlo-run", str(DATA / f"{name}.hlo"), "--platform", platform, "--num-partitions", str(n),
                 "--inputs", str(inputs), "--output", str(output))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(output) as got:
        outs = sorted((k for k in data.files if k.startswith("out")), key=lambda k: int(k[3:]))
        assert sorted(got.files) == sorted(outs)
        for k in outs:
            np.testing.assert_allclose(got[k], data[k], rtol=1e-5, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("name", ["megatron_mlp_n4", "mesh2d_reshard_n8", "dp_mlp_step_n2", "uneven_norm_n8"])
def test_hlo_run_interpreter_takes_and_gives_global_arrays(name, tmp_path):
    _global_run(name, tmp_path, "interpreter", int(name.rsplit("_n", 1)[1]))


@pytest.mark.skipif(not (BIN / "mpiexec").is_file(), reason="needs the mpi extra (mpiexec)")
@pytest.mark.parametrize("name", ["megatron_mlp_n4", "dot_reduce_scatter_n4", "shard_map_psum_n4",
                                  "dp_mlp_step_n4", "uneven_contract_n4"])
def test_hlo_run_host_over_mpi_takes_and_gives_global_arrays(name, tmp_path):
    """Also checked by hlo-run against its default reference, the interpreter: the global program
    on one device, or for the shard_map program the partitioned one on the 4 devices."""
    _global_run(name, tmp_path, "host", 4)


@pytest.mark.parametrize("n", [4, 8])
def test_the_data_parallel_steps_gradient_all_reduces_are_combined_as_xla_combines_them(n):
    """Partitioning leaves one all-reduce per gradient; after fusion the all-reduce combiner makes
    them one, asynchronous (XLA's partitioned program, testdata/spmd/xla.json: one all-reduce)."""
    import json

    xla = json.loads((DATA / "xla.json").read_text())[f"dp_mlp_step_n{n}"]["collectives"]
    proc = _tool("hlo-opt", "--num-partitions", str(n), str(DATA / f"dp_mlp_step_n{n}.hlo"))
    assert proc.returncode == 0, proc.stderr
    starts = [line for line in proc.stdout.splitlines() if " all-reduce-start(" in line]
    assert xla == {"all-reduce": 1} and len(starts) == 1 and proc.stdout.count("all-reduce-done(") == 1
    assert starts[0].split(" = ")[1].startswith("(f32[")  # two gradients in one tuple
    for op in (" all-reduce(", "all-gather", "reduce-scatter", "collective-permute"):
        assert op not in proc.stdout


def test_hlo_opt_makes_a_reduce_scatter_of_a_contraction_wanted_split():
    """The partial sums of the split contraction go straight into the wanted row tiles: one
    reduce-scatter, as XLA:GPU's pipeline ends with (XLA:CPU, which recorded the results, keeps an
    all-reduce and a dynamic-slice)."""
    proc = _tool("hlo-opt", "--num-partitions", "4", str(DATA / "dot_reduce_scatter_n4.hlo"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("reduce-scatter(") == 1 and "all-reduce(" not in proc.stdout


def test_hlo_run_sharded_module_without_device_count_is_an_error():
    proc = _tool("hlo-run", str(DATA / "batch_dot_n4.hlo"), "--platform", "interpreter")
    _one_line_error(proc, "sharded over 4 devices", "--num-partitions")


MODULE = """HloModule m

ENTRY e {{
  p = f32[{dims}] parameter(0), sharding={sharding}
  ROOT n = f32[{dims}] negate(p)
}}
"""


@pytest.mark.parametrize("dims, sharding, fragments", [
    ("8,4", "{devices=[3,1]0,1,2}", ("%p", "invalid sharding", "3 devices")),       # tile count != devices
    ("8,4", "{devices=[2,1]0,5}", ("%p", "invalid sharding", "device 5")),          # id out of range
    ("8,4", "{devices=[2,1,2]<=[4] last_tile_dims={manual}}", ("%p", "manual")),   # manual region
])
def test_hlo_opt_bad_shardings_are_one_line_errors(dims, sharding, fragments):
    text = MODULE.format(dims=dims, sharding=sharding)
    proc = _tool("hlo-opt", "--num-partitions", "4", "-", stdin=text)
    _one_line_error(proc, *fragments)


def test_hlo_opt_bad_shardy_attribute_is_a_one_line_error():
    text = ('HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=4]>}}\n\n'
            'ENTRY e {\n  p = f32[8] parameter(0)\n'
            '  ROOT r = f32[8] custom-call(p), custom_call_target="xla.sdy.FuncResultSharding", '
            'custom_call_has_side_effect=true, '
            'frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{\\"z\\"}]>]>"}\n}\n')
    proc = _tool("hlo-opt", "--num-partitions", "4", "-", stdin=text)
    _one_line_error(proc, "%r", "unknown mesh axis 'z'")


def test_manual_region_of_the_wrong_shape_is_a_one_line_error():
    """A shard_map region whose per-device operand is not the tile its in_sharding gives (the
    first operand's columns, f32[8,16] -> f32[8,4], said to be split by rows)."""
    good = (DATA / "shard_map_psum_n4.hlo").read_text()
    text = good.replace('in_shardings="#sdy.sharding_per_value<[<@mesh, [{}, {\\"x\\"}]>',
                        'in_shardings="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}, {}]>')
    assert text != good
    proc = _tool("hlo-opt", "--num-partitions", "4", "-", stdin=text)
    _one_line_error(proc, "%shard_map.9", "manual region", "f32[8,4]")


def test_hlo_opt_manual_region_without_num_partitions_is_a_one_line_error(tmp_path):
    text = ('HloModule m\n\nENTRY e {\n  p = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n'
            '  m = f32[2,16] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}\n'
            '  n = f32[2,16] negate(m), sharding={manual}\n'
            '  ROOT r = f32[8,16] custom-call(n), custom_call_target="SPMDShardToFullShape", '
            'sharding={devices=[4,1]<=[4]}\n}\n')
    out = tmp_path / "out.hlo"
    proc = _tool("hlo-opt", "-", "-o", str(out), stdin=text)
    _one_line_error(proc, "%m", "no num_partitions", "--num-partitions N")
    assert not out.exists()


GSPMD_REGION = """HloModule gspmd_region, num_partitions=4

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  p = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}
  pin = f32[8,16] custom-call(p), custom_call_target="Sharding", sharding={devices=[4,1]<=[4]}
  m = f32[2,16] custom-call(pin), custom_call_target="SPMDFullToShardShape", sharding={manual}
  ar = f32[2,16] all-reduce(m), replica_groups={{0,1,2,3}}, channel_id=1, use_global_device_ids=true,
       to_apply=sum, sharding={manual}
  e = f32[2,16] exponential(ar), sharding={manual}
  back = f32[2,16] custom-call(e), custom_call_target="Sharding", sharding={manual}
  ROOT r = f32[8,16] custom-call(back), custom_call_target="SPMDShardToFullShape", sharding={devices=[4,1]<=[4]}
}
"""


@pytest.mark.parametrize("platform", ["interpreter", "host"])
def test_gspmd_manual_region_runs_on_global_arrays(platform, tmp_path):
    """A shard_map region in GSPMD's form (SPMDFullToShardShape / SPMDShardToFullShape around
    {manual} values, as XLA's tests and older jax write it): each device's row block, summed over
    the 4 devices by the user's all-reduce, exp'd, and gathered back as the rows of the result."""
    src, inputs, output = tmp_path / "m.hlo", tmp_path / "in.npz", tmp_path / "out.npz"
    src.write_text(GSPMD_REGION)
    x = np.random.default_rng(3).uniform(-1, 1, (8, 16)).astype(np.float32)
    np.savez(inputs, arg0=x)
    proc = _tool("hlo-run", str(src), "--platform", platform, "--inputs", str(inputs), "--output", str(output))
    assert proc.returncode == 0, proc.stderr
    (got,) = np.load(output).values()
    want = np.tile(np.exp(x.reshape(4, 2, 16).sum(axis=0)), (4, 1))
    np.testing.assert_allclose(got, want, rtol=1e-5)
