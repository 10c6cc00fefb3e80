"""The host platform over MPI (issue 16 item 3): every module of `testdata/multidev/` compiled once
by hlo-codegen and run by `hlo-run --platform host`, one MPI rank per device, matches the
interpreter on every device, and XLA:CPU through hlo-run's own comparison; plus the failure
paths (a rank that fails, a collective nobody else reaches) and hlo-run started under mpiexec.

One module per collective kind runs in the default set; the rest are `slow` (each run starts N
processes that JIT their kernels: 1-2.5 s on 2 cores).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "testdata" / "multidev"
MODULES = sorted(DATA.glob("*.hlo"))
# one per collective kind and device-id thunk, on 2, 4 and 8 ranks
DEFAULT = {"psum_n2", "all_gather_tiled_n4", "psum_scatter_n8", "all_to_all_n4", "ppermute_ring_n8",
           "axis_index_n8", "sharded_mlp_n8", "odd_all_to_all_n3", "mesh2x3_psum_y_n6"}
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(not (BIN / "mpiexec").is_file(), reason="needs the mpi extra (mpiexec)")


def _hlo_run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hlo-run"), *args], capture_output=True, text=True, timeout=timeout)


def _arguments(module, n: int) -> list:
    from hlo_run.devices import stack
    from hlo_run.inputs import make_fake_arguments

    per_device = [make_fake_arguments(module, 3, device=d) for d in range(n)]
    return [stack([a[k] for a in per_device]) for k in range(len(per_device[0]))]


def _check_against_interpreter(path: Path, output: Path, args: list, replicas: int, partitions: int):
    from hlo_common.hlo.parser import parse_module
    from hlo_common.interpreter.devices import run_devices
    from hlo_run.compare import flatten_leaves
    from hlo_run.devices import per_device_args

    module = parse_module(path.read_text(), path.name)
    expected = run_devices(module, per_device_args(args, replicas * partitions), replicas, partitions)
    with np.load(output) as out:
        got = [out[k] for k in sorted(out.files, key=lambda k: int(k[3:]))]
    for d, per_device in enumerate(expected):
        for i, e in enumerate(flatten_leaves(per_device)):
            np.testing.assert_allclose(got[i][d], e, rtol=1e-4, atol=1e-4, err_msg=f"device {d} out{i}")


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem, marks=() if p.stem in DEFAULT
                                               else pytest.mark.slow) for p in MODULES])
def test_host_over_mpi_matches_the_interpreter_and_xla_cpu(tmp_path, path):
    pytest.importorskip("jax")
    from hlo_common.hlo.parser import parse_module
    from hlo_run.devices import device_counts

    module = parse_module(path.read_text(), path.name)
    replicas, partitions = device_counts(module, None, None)
    args = _arguments(module, replicas * partitions)
    inputs, output = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{f"arg{i}": a for i, a in enumerate(args)})
    proc = _hlo_run("--platform", "host", "--reference-platform", "xla-cpu", "--inputs", str(inputs),
                    "--output", str(output), str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Results on host and xla-cpu are close enough" in proc.stderr
    _check_against_interpreter(path, output, args, replicas, partitions)


# Every collective kind in one module, in the forms jax's modules lack: all-gather, reduce-scatter
# and all-to-all along a minor dimension (packed through a temporary), a non-associative region
# (folded in group order), bf16 and pred reductions, max on s32, collective-broadcast from a
# group's first member, a permute leaving device 0 without a source (zeros), an async pair and a
# tuple all-reduce over a reversed group.
KINDS = """HloModule kinds, num_partitions=4

add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
addbf { a = bf16[] parameter(0) b = bf16[] parameter(1) ROOT s = bf16[] add(a, b) }
andp { a = pred[] parameter(0) b = pred[] parameter(1) ROOT s = pred[] and(a, b) }
sub2 { a = f32[] parameter(0) b = f32[] parameter(1) two = f32[] constant(2) t = f32[] multiply(a,
      two) ROOT s = f32[] subtract(t, b) }
maxs { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] maximum(a, b) }

ENTRY main {
  x = f32[4,8]{1,0} parameter(0)
  h = bf16[16] parameter(1)
  q = pred[6] parameter(2)
  k = s32[3,4] parameter(3)
  ag = f32[4,32]{1,0} all-gather(x), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={1},
      use_global_device_ids=true
  rs = f32[4,2]{1,0} reduce-scatter(x), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={1},
      use_global_device_ids=true, to_apply=add
  a2a = f32[4,8]{1,0} all-to-all(x), channel_id=3, replica_groups={{0,1,2,3}}, dimensions={1}
  reg = f32[4,8]{1,0} all-reduce(x), channel_id=4, replica_groups={{0,1,2,3}},
      use_global_device_ids=true, to_apply=sub2
  bf = bf16[16] all-reduce(h), channel_id=5, replica_groups={{0,1},{2,3}},
      use_global_device_ids=true, to_apply=addbf
  pa = pred[6] all-reduce(q), channel_id=6, replica_groups={{0,1,2,3}}, use_global_device_ids=true,
      to_apply=andp
  mx = s32[3,4] all-reduce(k), channel_id=7, replica_groups={{0,2},{1,3}},
      use_global_device_ids=true, to_apply=maxs
  cb = f32[4,8]{1,0} collective-broadcast(x), channel_id=8, replica_groups={{1,0},{3,2}}
  cp = f32[4,8]{1,0} collective-permute(x), channel_id=9, source_target_pairs={{0,1},{1,2},{2,3}}
  st = f32[4,8]{1,0} all-reduce-start(x), channel_id=10, replica_groups={{0,1,2,3}},
      use_global_device_ids=true, to_apply=add
  dn = f32[4,8]{1,0} all-reduce-done(st)
  tup = (f32[4,8]{1,0}, s32[3,4]) all-reduce(x, k), channel_id=11, replica_groups={{3,2,1,0}},
      use_global_device_ids=true, to_apply=add
  ROOT t = (f32[4,32]{1,0}, f32[4,2]{1,0}, f32[4,8]{1,0}, f32[4,8]{1,0}, bf16[16], pred[6],
      s32[3,4], f32[4,8]{1,0}, f32[4,8]{1,0}, f32[4,8]{1,0}, (f32[4,8]{1,0}, s32[3,4])) tuple(ag,
      rs, a2a, reg, bf, pa, mx, cb, cp, dn, tup)
}
"""


def test_every_collective_kind_matches_the_interpreter(tmp_path):
    path = tmp_path / "kinds.hlo"
    path.write_text(KINDS)
    proc = _hlo_run("--platform", "host", "--no-hlo-passes", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Results on host and interpreter are close enough" in proc.stderr


def test_verbose_prints_the_device_to_rank_mapping():
    proc = _hlo_run("--platform", "host", "--verbose", str(DATA / "mesh2d_axis_index_n4.hlo"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = re.findall(r"device (\d) \(replica (\d), partition (\d)\) -> MPI rank (\d) of 4", proc.stderr)
    assert sorted(lines) == [(str(d), "0", str(d), str(d)) for d in range(4)]


def test_hlo_run_started_under_mpiexec_runs_as_one_rank(tmp_path):
    path = DATA / "psum_n4.hlo"
    output = tmp_path / "out.npz"
    proc = subprocess.run([str(BIN / "mpiexec"), "-n", "4", str(BIN / "hlo-run"), "--platform", "host",
                           "--seed", "3", "--output", str(output), str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("close enough") == 1  # rank 0 compares; the others only run
    from hlo_common.hlo.parser import parse_module

    _check_against_interpreter(path, output, _arguments(parse_module(path.read_text(), path.name), 4), 1, 4)


HANG = """HloModule hang, num_partitions=2
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
lonely { x = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true,
    to_apply=add }
alone { ROOT y = f32[4] parameter(0) }
ENTRY main { p = f32[4] parameter(0) pid = u32[] partition-id() zero = u32[] constant(0)
  first = pred[] compare(pid, zero), direction=EQ
  ROOT c = f32[4] conditional(first, p, p), true_computation=lonely,
    false_computation=alone }
"""

FAIL = """HloModule fail, num_partitions=2
add { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] add(a, b) }
cond { c = (s32[], s32[]) parameter(0) i = s32[] get-tuple-element(c), index=0
  n = s32[] get-tuple-element(c), index=1 ROOT lt = pred[] compare(i, n), direction=LT }
body { b = (s32[], s32[]) parameter(0) i = s32[] get-tuple-element(b), index=0
  n = s32[] get-tuple-element(b), index=1 one = s32[] constant(1) j = s32[] add(i, one)
  ROOT t = (s32[], s32[]) tuple(j, n) }
ENTRY main { p = s32[] parameter(0) pid = u32[] partition-id() pids = s32[] convert(pid)
  five = s32[] constant(5) n = s32[] multiply(pids, five) zero = s32[] constant(0)
  init = (s32[], s32[]) tuple(zero, n)
  w = (s32[], s32[]) while(init), condition=cond, body=body
  i = s32[] get-tuple-element(w), index=0
  ROOT ar = s32[] all-reduce(i), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true,
    to_apply=add }
"""


@pytest.mark.parametrize("text, args, message", [
    (HANG, ["--collective-timeout", "3"],
     # (hlo-opt's async-collective-creator made %ar an all-reduce-start / all-reduce-done pair)
     r"rank 0 \(device 0\): thunk \d+ kAllReduceStart all-reduce-start: the other devices of its group "
     r"\[0, 1\] did not "
     r"reach it within 3 s"),
    (FAIL, ["--max-while-iterations", "3"],
     r"rank 1 \(device 1\): .*while %w reached --max-while-iterations=3"),
])
def test_a_failing_rank_or_a_lonely_collective_stops_every_rank_with_one_error(tmp_path, text, args, message):
    path, output = tmp_path / "m.hlo", tmp_path / "out.npz"
    path.write_text(text)
    start = time.monotonic()
    proc = _hlo_run("--platform", "host", "--reference-platform", "none", "--output", str(output), *args,
                    str(path), timeout=120)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert re.search(message, errors[0]), errors[0]
    assert not output.exists()
    assert time.monotonic() - start < 60
