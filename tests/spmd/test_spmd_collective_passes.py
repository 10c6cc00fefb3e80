"""Issue 17 item 5 end to end: jax's sharded modules through hlo-opt's whole gpu pipeline (SPMD
partitioning, then all-reduce-simp, the combiners, async-collective-creator and the scheduler's
placement of the async pairs) keep XLA:CPU's numbers, on the N-device interpreter and on the
host over MPI, and the optimized HLO holds the combined and asynchronous forms."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from spmd_testlib import DATA, run_global

BIN = Path(sys.executable).parent

# module -> what its optimized HLO must hold (and the synchronous form it must no longer hold)
EXPECTED_FORMS = {
    # the two gradient all-reduces of the data-parallel step, combined into one asynchronous pair
    "dp_mlp_step_n4": (r"\(f32\[16,8\]\{0,1\}, f32\[4,16\]\{0,1\}\) all-reduce-start\(", "all-reduce("),
    "megatron_mlp_n4": (r"all-reduce-done\(", "all-reduce("),
    "shard_map_all_gather_n4": (r"all-gather-done\(", "all-gather("),
    "conv_spatial_n4": (r"collective-permute-start\(", "collective-permute("),
    # reduce-scatter and all-to-all run in a wrapped computation, as XLA:GPU writes them
    "dot_reduce_scatter_n4": (r"async-start\(%\S+\), calls=%wrapped_reduce_scatter", "all-reduce"),
    "reshard_rows_to_cols_n4": (r"async-start\(%\S+\), calls=%wrapped_all_to_all", "all-gather"),
    # two all-gathers combined: an all-gather-start of two operands, ((in, in), (out, out))
    "dp_mlp_step_n2": (r"\(\(f32\[4,16\]\{1,0\}, f32\[4,8\]\{1,0\}\), "
                       r"\(f32\[8,16\]\{1,0\}, f32\[8,8\]\{1,0\}\)\) all-gather-start\(", "all-gather("),
}


def _optimized(name: str) -> str:
    n = name.rsplit("_n", 1)[1]
    proc = subprocess.run([str(BIN / "hlo-opt"), "--num-partitions", n, str(DATA / f"{name}.hlo")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _check_forms(name: str, text: str) -> None:
    wanted, gone = EXPECTED_FORMS[name]
    assert re.search(wanted, text), wanted
    assert gone not in text
    # the scheduled entry computation: each done after its start
    lines = text[text.index("\nENTRY"):].splitlines()
    for k, line in enumerate(lines):
        match = re.match(r"\s*(?:ROOT )?%(\S+) = .* \S+-start\(", line)
        if match:
            assert any(f"-done(%{match.group(1)})" in later for later in lines[k + 1:]), line


def _args_and_outputs(name: str):
    data = np.load(DATA / f"{name}.npz")

    def named(prefix):
        keys = sorted((k for k in data.files if k.startswith(prefix)), key=lambda k: int(k[3:]))
        return [data[k] for k in keys]

    return named("arg"), named("out")


@pytest.mark.parametrize("name", ["dp_mlp_step_n4", "megatron_mlp_n4", "shard_map_all_gather_n4",
                                  "dot_reduce_scatter_n4"])
def test_optimized_program_on_the_interpreter_matches_xla_cpu(name):
    from hlo_common.hlo.parser import parse_module

    text = _optimized(name)
    _check_forms(name, text)
    args, expected = _args_and_outputs(name)
    got = run_global(parse_module(text, name), args, int(name.rsplit("_n", 1)[1]))
    for k, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=f"out{k}")


def test_hlo_codegen_assigns_buffers_to_a_two_operand_all_gather_start(tmp_path):
    """The done of a combined all-gather of two operands reads the start's {1} (results), though
    the start's tuple, ((in, in), (out, out)), has as many elements as the done's: the dataflow
    analysis took it for the all-reduce form and found no buffer for the results."""
    text = _optimized("dp_mlp_step_n2")
    _check_forms("dp_mlp_step_n2", text)
    proc = subprocess.run([str(BIN / "hlo-codegen"), "-o", str(tmp_path / "m.manifest")], input=text,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.skipif(not (BIN / "mpiexec").is_file(), reason="needs the mpi extra (mpiexec)")
@pytest.mark.parametrize("name", ["dp_mlp_step_n4", "conv_spatial_n4", "shard_map_all_gather_n4",
                                  "dot_reduce_scatter_n4", "reshard_rows_to_cols_n4", "dp_mlp_step_n2"])
def test_optimized_program_on_the_host_matches_xla_cpu(name, tmp_path):
    """hlo-run compiles jax's module with hlo-opt's gpu pipeline and hlo-codegen, runs the
    Start / Done thunks over MPI on 4 processes and gathers the global results."""
    args, expected = _args_and_outputs(name)
    inputs, output, dumps = tmp_path / "in.npz", tmp_path / "out.npz", tmp_path / "dumps"
    np.savez(inputs, **{f"arg{k}": a for k, a in enumerate(args)})
    proc = subprocess.run([str(BIN / "hlo-run"), str(DATA / f"{name}.hlo"), "--platform", "host",
                           "--num-partitions", name.rsplit("_n", 1)[1], "--inputs", str(inputs),
                           "--output", str(output), "--dump-to", str(dumps)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (optimized,) = dumps.glob("*.after_optimizations.txt")
    _check_forms(name, optimized.read_text())
    with np.load(output) as got:
        for k, e in enumerate(expected):
            np.testing.assert_allclose(got[f"out{k}"], e, rtol=1e-5, atol=1e-5, err_msg=f"out{k}")
