"""`make bench-gpu`'s script without a GPU: the fixed module set loads, the table is formatted
from injected timers, and with no GPU the script stops with one line (bench/bench_gpu.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import bench_gpu  # noqa: E402


class FakeTimers:
    """Times proportional to the bytes moved: ours 2 ns/B... as if the GPU were there."""

    def __init__(self):
        self.calls = []

    def card(self):
        return "Fake GPU 80GB"

    def ours(self, opt_text, args):
        self.calls.append("ours")
        return 2e-3

    def xla(self, text, args):
        self.calls.append("xla")
        return 1e-3

    def copy(self, nbytes):
        self.calls.append("copy")
        return 1e-3


def test_module_set_loads_and_covers_the_issue():
    modules = bench_gpu.load_modules()
    labels = " ".join(label for label, _, _ in modules)
    for word in ("gelu", "reduce_row", "reduce_column", "transpose", "softmax", "layernorm", "rmsnorm",
                 "transformer_fwd", "gemm_bf16_4096", "gemm_bias_gelu", "int8_x_bf16", "attention", "resnet50_stage"):
        assert word in labels
    from hlo_common.hlo.parser import parse_module

    for label, path, text in modules:
        assert parse_module(text, str(path)).entry.parameters, label


def test_table_from_injected_timers(tmp_path, capsys):
    timers = FakeTimers()
    assert bench_gpu.main(["-k", "reduce_row", "--out", str(tmp_path)], timers=timers) == 0
    out = capsys.readouterr().out
    assert timers.calls == ["ours", "xla", "copy"] * 2
    lines = out.splitlines()
    assert "Fake GPU 80GB" in lines[0]
    row = next(ln for ln in lines if ln.startswith("reduce_row "))
    fields = row.split()
    assert fields[1:4] == ["2000.0", "1000.0", "2.00"]
    # bytes / 2 ms against bytes / 1 ms of the copy: 50 % of the copy bandwidth
    assert fields[-1] == "50%"
    files = list(tmp_path.glob("gpu-*-fake-gpu-80gb.txt"))
    assert len(files) == 1 and files[0].read_text() == out
    assert "slower than XLA: 2" in out


def test_without_a_gpu_one_line_and_exit_1(monkeypatch, capsys):
    monkeypatch.setattr(bench_gpu, "gpu_unavailable", lambda: "no NVIDIA driver found")
    assert bench_gpu.main(["--check-gpu"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench-gpu: no usable GPU: no NVIDIA driver found"]


def test_bad_filter_is_an_error(capsys):
    assert bench_gpu.main(["-k", "no-such-module"], timers=FakeTimers()) == 1


def test_xla_runner_on_the_cpu_backend():
    """The jax route of the XLA column, on jax's CPU backend (the GPU run uses "cuda")."""
    import numpy as np

    from hlo_common.hlo.parser import parse_module

    text = (ROOT / "testdata" / "fusion" / "reduce_row.hlo").read_text()
    args = bench_gpu.random_inputs(parse_module(text, "reduce_row.hlo"))
    once = bench_gpu.xla_runner(text, args, "cpu")
    assert once() > 0
    (got,) = once.results()
    np.testing.assert_allclose(got, args[0].sum(axis=1), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_real_timers_on_one_module(tmp_path, capsys):
    """On a GPU: the three real timers give positive times for the row reduction."""
    reason = bench_gpu.gpu_unavailable()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    assert bench_gpu.main(["-k", "reduce_row_bf16", "--runs", "3", "--out", str(tmp_path)]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("reduce_row_bf16"))
    assert "-" not in row.split()[1:4], row


def test_our_timer_brackets_the_whole_sequence_on_the_host_device():
    """`ours` on hlo-run's host device: one timer around the sequence, none per thunk, and the
    per-thunk timer is back afterwards."""
    from hlo_common.hlo.parser import parse_module
    from hlo_run.backends.host import HostDevice

    sys.path.insert(0, str(ROOT / "bench"))
    from fusion_vs_xla import run_hlo_opt

    path = ROOT / "testdata" / "softmax.hlo"
    opt_text, err, _ = run_hlo_opt(path, [])
    assert opt_text is not None, err
    device = HostDevice()
    calls = []
    real = device.timer

    def counting_timer():
        calls.append(1)
        return real()
    device.timer = counting_timer
    timers = bench_gpu.CudaTimers(2, device=device, target="host")
    seconds = timers.ours(opt_text, bench_gpu.random_inputs(parse_module(path.read_text(), str(path))))
    assert seconds > 0
    assert len(calls) == 2 + 3  # one per timed run and warm-up run, none per thunk
    assert device.timer is counting_timer


def test_a_sample_is_a_batch_of_back_to_back_runs():
    """`--batch N`: each timed sample runs the module N times and reports the mean, ours (the
    thunk sequence N times between one pair of timer reads) as XLA's (N executions queued, the
    last waited for), so fixed dispatch and synchronization costs count once per sample."""
    import numpy as np

    from hlo_common.hlo.parser import parse_module
    from hlo_run.backends.host import HostDevice

    from fusion_vs_xla import run_hlo_opt

    path = ROOT / "testdata" / "fusion" / "reduce_row.hlo"
    opt_text, err, _ = run_hlo_opt(path, [])
    assert opt_text is not None, err
    args = bench_gpu.random_inputs(parse_module(path.read_text(), str(path)))
    device = HostDevice()
    launches = []
    real_launch = device.launch
    device.launch = lambda *a, **k: (launches.append(1), real_launch(*a, **k))[1]
    timers = bench_gpu.CudaTimers(2, device=device, target="host", batch=3)
    assert timers.ours(opt_text, args) > 0
    kernels = sum(1 for ln in opt_text.splitlines() if " fusion(" in ln and "ENTRY" not in ln)
    assert kernels >= 1 and len(launches) == (2 + 3) * 3 * kernels  # (runs + warm-up) x batch

    once = bench_gpu.xla_runner(path.read_text(), args, "cpu", batch=4)
    assert once() > 0
    (got,) = once.results()
    np.testing.assert_allclose(got, args[0].sum(axis=1), rtol=1e-4, atol=1e-3)
