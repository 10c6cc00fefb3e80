"""bench/bench_nccl.py without a GPU: nccl-tests' bus-bandwidth factors, the module of every kind
compiles to exactly the one collective thunk the worker times (on one GPU with --keep-collectives,
on several as a multi-device module), and with no GPU the script says why in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from codegen_testlib import FakeKernelBackend

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import bench_collectives  # noqa: E402
import bench_nccl  # noqa: E402


@pytest.mark.parametrize("kind, n, factor", [
    ("all-reduce", 8, 1.75), ("all-reduce", 2, 1.0), ("all-gather", 4, 0.75), ("reduce-scatter", 8, 0.875),
    ("all-to-all", 2, 0.5), ("collective-broadcast", 8, 1.0), ("collective-permute", 4, 1.0),
    ("all-reduce", 1, 0.0),
])
def test_bus_factors_are_nccl_tests(kind, n, factor):
    assert bench_nccl.bus_factor(kind, n) == pytest.approx(factor)


def test_all_gather_counts_the_gathered_bytes():
    assert bench_nccl.algorithm_bytes("all-gather", 1 << 20, 4) == 4 << 20
    assert bench_nccl.algorithm_bytes("reduce-scatter", 1 << 20, 4) == 1 << 20


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("kind", bench_nccl.KINDS)
def test_each_module_is_one_collective_thunk(kind, n):
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module
    from hlo_common.manifest.collective_thunks import CollectiveThunk

    text, out_bytes = bench_collectives.module_text(kind, 64 << 10, n)
    options = CompileOptions(target="host", keep_collectives=n == 1)
    manifest = compile_module(parse_module(text), options, FakeKernelBackend()).manifest
    (thunk,) = [t for t in manifest.all_thunks() if isinstance(t, CollectiveThunk)]
    assert thunk.collective == kind and thunk.buffers[0].destination.size == out_bytes


def test_without_a_gpu_it_says_why_and_succeeds(monkeypatch, capsys):
    monkeypatch.setattr(bench_nccl, "missing", lambda: "no usable GPU: no driver")
    monkeypatch.setattr(sys, "argv", ["bench_nccl.py"])
    assert bench_nccl.main() == 0
    assert capsys.readouterr().out == "bench_nccl: skipped: no usable GPU: no driver\n"
