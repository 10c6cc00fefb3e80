"""cuDNN convolution calls on the cuda target, below the GPU (issue 20 item 3): hlo-codegen keeps
the `__cudnn$conv*` calls cuDNN takes as CudnnConvolutionThunks (the call's graph, a slice per
graph tensor, the scratch as workspace), lowers the others to kernels of ours (said once in the
notes), and hlo-run's manifest runtime hands each thunk to the device's `cudnn_convolution`,
which on the cuda platform is the cuDNN graph runner. No GPU here: the device below is the host
device with the thunk computed by the interpreter's cuDNN semantics from the pointers it is given,
so the buffers the runtime passes by tensor name are checked end to end."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.errors import HloError
from hlo_common.gpu.cudnn_graph import ConvGraph, describe_call
from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.cudnn_conv import CUDNN_CONV_TARGETS, _cudnn_convolution
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.cudnn_thunks import CudnnConvolutionThunk
from hlo_common.manifest.layout_bytes import array_to_bytes, bytes_to_array
from hlo_common.manifest.manifest import load_manifest
from hlo_common.manifest.thunks import walk
from hlo_run.backends.host import HostDevice, _view
from hlo_run.manifest_runtime import ManifestExecutable

CUDNN = Path(__file__).resolve().parents[3] / "testdata" / "cudnn"


def _calls(module) -> list:
    return [i for c in module.computations for i in c.instructions
            if i.opcode == "custom-call" and i.attrs.get("custom_call_target") in CUDNN_CONV_TARGETS]


def _cudnn_thunks(manifest) -> list[CudnnConvolutionThunk]:
    return [t for t in walk(manifest.thunks) if isinstance(t, CudnnConvolutionThunk)]


@pytest.mark.parametrize("name", ["forward_side_input_relu", "grad_grouped", "forward_f16_bias_relu"])
def test_every_call_of_xla_output_is_a_cudnn_thunk_with_its_graph(name):
    text = (CUDNN / f"{name}.xla_gpu.hlo").read_text()
    calls = {c.name: c for c in _calls(parse_module(text, name))}
    result = compile_module(parse_module(text, name), CompileOptions(target="cuda"))
    thunks = _cudnn_thunks(result.manifest)
    assert sorted(t.profile_annotation for t in thunks) == sorted(calls)
    for t in thunks:
        call = calls[t.profile_annotation]
        assert t.graph == describe_call(call).to_json()
        assert ConvGraph.from_json(t.graph) == describe_call(call)
        graph = describe_call(call)
        for desc in [d for _, d in graph.inputs] + [p.tensor for p in graph.pointwise if p.tensor]:
            assert dict(t.buffers)[desc.name].size == call.operands[desc.operand].shape.byte_size()
        assert dict(t.buffers)["output"].size == call.shape.tuple_shapes[0].byte_size()
    again = load_manifest(result.manifest.to_bytes())  # the thunks survive the manifest JSON
    assert _cudnn_thunks(again) == thunks


def test_the_host_target_keeps_no_cudnn_call():
    text = (CUDNN / "grad_grouped.xla_gpu.hlo").read_text()
    result = compile_module(parse_module(text, "g"), CompileOptions(target="host"))
    assert _cudnn_thunks(result.manifest) == [] and _calls(result.module) == []


S32_CALL = """HloModule s32call
ENTRY e {
  x = s8[2,6,6,8] parameter(0)
  w = s8[8,3,3,8] parameter(1)
  c = (s32[2,6,6,8], u8[0]) custom-call(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_o01i->b01f,
    custom_call_target="__cudnn$convForward", backend_config={"cudnn_conv_backend_config":{}}
  ROOT g = s32[2,6,6,8] get-tuple-element(c), index=0
}
"""


S32_CONV = """HloModule s32conv
ENTRY e {
  x = s8[2,6,6,8] parameter(0)
  w = s8[8,3,3,8] parameter(1)
  ROOT c = s32[2,6,6,8] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_o01i->b01f
}
"""


def test_a_call_cudnn_cannot_take_becomes_our_kernel_said_once(caplog):
    with caplog.at_level(logging.INFO, logger="hlo_notes"):
        result = compile_module(parse_module(S32_CALL, "s32"), CompileOptions(target="cuda"))
    assert _cudnn_thunks(result.manifest) == [] and _calls(result.module) == []
    assert result.manifest.kernels  # the convolution is a kernel of ours
    notes = [r.getMessage() for r in caplog.records if r.name == "hlo_notes"]
    assert notes == ["%c: cuDNN has no convolution int8 -> int32; it runs as a convolution kernel of ours"]


FUSED_CALL = """HloModule fused
ENTRY e {
  x = f32[2,6,6,8] parameter(0)
  w = f32[16,3,3,8] parameter(1)
  b = f32[16] parameter(2)
  s = f32[2,6,6,16] parameter(3)
  c = (f32[2,6,6,16], u8[0]) custom-call(x, w, b, s), window={size=3x3 pad=1_1x1_1},
    dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convBiasActivationForward",
    backend_config={"cudnn_conv_backend_config":{"activation_mode":"kRelu","conv_result_scale":0.5,
                    "side_input_scale":2}}
  ROOT g = f32[2,6,6,16] get-tuple-element(c), index=0
}
"""

FILTER_CALL = """HloModule wgrad
ENTRY e {
  x = f32[2,8,8,4] parameter(0)
  dy = f32[2,4,4,6] parameter(1)
  c = (f32[6,3,3,4]{3,2,1,0}, u8[0]) custom-call(x, dy), window={size=3x3 stride=2x2 pad=1_1x1_1},
    dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convBackwardFilter",
    backend_config={"cudnn_conv_backend_config":{}}
  ROOT g = f32[6,3,3,4] get-tuple-element(c), index=0
}
"""


class _CudnnByInterpreter(HostDevice):
    """The host device with cuDNN thunks computed by the interpreter from the named pointers."""

    def __init__(self, calls: dict):
        super().__init__()
        self.calls, self.seen = calls, []

    def cudnn_convolution(self, thunk, pointers, workspace) -> None:
        call = self.calls[thunk.profile_annotation]
        graph = ConvGraph.from_json(thunk.graph)
        tensors = [d for _, d in graph.inputs] + [p.tensor for p in graph.pointwise if p.tensor]
        operands = [None] * len(call.operands)
        for d in tensors:
            shape = call.operands[d.operand].shape
            operands[d.operand] = bytes_to_array(_view(pointers[d.name], shape.byte_size()).tobytes(), shape)
        out_shape = call.shape.tuple_shapes[0]
        out = _cudnn_convolution(call, operands, None)[0]
        written = np.frombuffer(array_to_bytes(out, out_shape), np.uint8)
        _view(pointers["output"], out_shape.byte_size())[:] = written
        self.seen.append((thunk.profile_annotation, sorted(pointers)))


@pytest.mark.parametrize("text", [FUSED_CALL, FILTER_CALL], ids=["fused", "wgrad"])
def test_the_runtime_hands_the_thunk_its_buffers_by_tensor_name(text):
    module = parse_module(text, "m")
    calls = {c.name: c for c in _calls(module)}
    result = compile_module(parse_module(text, "m"), CompileOptions(target="cuda"))
    (thunk,) = _cudnn_thunks(result.manifest)
    device = _CudnnByInterpreter(calls)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(p.shape.dims).astype(np.float32) for p in module.entry.parameters]
    got = ManifestExecutable(result.manifest, device, "m").run(args)
    assert device.seen == [(thunk.profile_annotation, sorted(dict(thunk.buffers)))]
    np.testing.assert_allclose(np.asarray(got), np.asarray(evaluate(module, args)), rtol=1e-5, atol=1e-5)


def test_only_the_cuda_platform_runs_cudnn_thunks():
    result = compile_module(parse_module(FUSED_CALL, "m"), CompileOptions(target="cuda"))
    args = [np.zeros(p.shape.dims, np.float32) for p in parse_module(FUSED_CALL, "m").entry.parameters]
    with pytest.raises(HloError, match="the host platform cannot run cuDNN convolutions"):
        ManifestExecutable(result.manifest, HostDevice(), "m").run(args)


def test_the_cuda_platform_picks_the_cudnn_graph_runner(monkeypatch):
    """CudaDevice.cudnn_convolution: one handle on the device's stream, one runner, the thunk's
    graph as ConvGraph, the pointers and workspace passed through (no GPU: the runner is watched)."""
    from hlo_run import cudnn_runner
    from hlo_run.backends.cuda import CudaDevice

    runs, handles = [], []

    class Runner:
        def __init__(self, handle, scratch):
            handles.append(handle)
            assert scratch == device._cudnn_scratch  # plans needing more workspace get the device's

        def run(self, graph, pointers, workspace):
            runs.append((graph, pointers, workspace))

    monkeypatch.setattr(cudnn_runner, "CudnnConvRunner", Runner)
    monkeypatch.setattr(cudnn_runner, "make_handle", lambda stream: ("handle", stream))
    device = object.__new__(CudaDevice)  # no driver here: only what cudnn_convolution reads
    device.stream, device._cudnn, device._cudnn_workspace = 7, None, None
    result = compile_module(parse_module(FUSED_CALL, "m"), CompileOptions(target="cuda"))
    (thunk,) = _cudnn_thunks(result.manifest)
    for _ in range(2):
        device.cudnn_convolution(thunk, {"image": 1, "weight": 2, "bias": 3, "side_input": 4, "output": 5}, 0)
    assert handles == [("handle", 7)]  # made once, on the device's stream
    assert [r[0] for r in runs] == [describe_call(_calls(parse_module(FUSED_CALL, "m"))[0])] * 2
    assert runs[0][1:] == ({"image": 1, "weight": 2, "bias": 3, "side_input": 4, "output": 5}, 0)


def test_hlo_codegen_verbose_says_it_once_and_hlo_run_passes_it_on(tmp_path, capfd):
    """`hlo-codegen --verbose` prints the note (nothing without it); hlo-run --verbose runs the
    tools with --verbose and prints their notes."""
    from click.testing import CliRunner

    from hlo_codegen.cli import cli
    from hlo_run import compile_hook

    out = tmp_path / "m.json"
    loud = CliRunner().invoke(cli, ["--target", "cuda", "--verbose", "-o", str(out), "-"], input=S32_CALL)
    quiet = CliRunner().invoke(cli, ["--target", "cuda", "-o", str(out), "-"], input=S32_CALL)
    assert loud.exit_code == 0 and quiet.exit_code == 0, loud.output
    notes = [line for line in loud.stderr.splitlines() if line.startswith("hlo-codegen: note: ")]
    assert len(notes) == 1 and "int8 -> int32" in notes[0]
    assert "note:" not in quiet.stderr
    capfd.readouterr()
    for notes in (True, False):
        compile_hook.compile_to_manifest(S32_CONV, "s32", "host", optimize=True, notes=notes)
        said = [line for line in capfd.readouterr().err.splitlines() if line.startswith("hlo-opt: note: ")]
        assert len(said) == (1 if notes else 0) and all("stays a convolution of ours" in s for s in said)


def test_a_plan_needing_more_workspace_than_the_scratch_gets_the_device_buffer(monkeypatch):
    """hlo-opt's calls (as XLA's before autotuning) have u8[0] scratch: a plan needing workspace
    runs on the device's buffer, or is refused when the runner has none (cuDNN itself faked)."""
    from hlo_common.gpu.cudnn_graph import CudnnUnsupported
    from hlo_run import cudnn_runner

    executed = []

    class Graph:
        def __getattr__(self, name):  # validate, build_operation_graph, ... build_plans
            return lambda *a, **k: None

        def get_workspace_size(self):
            return 4096

        def execute(self, values, workspace, handle):
            executed.append(workspace)

    class Cudnn:
        heur_mode = type("H", (), {"A": "A", "FALLBACK": "FALLBACK"})

    monkeypatch.setattr(cudnn_runner, "_cudnn", lambda: Cudnn)
    monkeypatch.setattr(cudnn_runner, "build_pygraph", lambda desc, handle: (Graph(), {}))
    graph = describe_call(_calls(parse_module(FUSED_CALL, "m"))[0])
    assert graph.workspace_bytes == 0
    sizes = []
    runner = cudnn_runner.CudnnConvRunner("h", scratch=lambda n: sizes.append(n) or 1000)
    runner.run(graph, {}, 0)
    assert executed == [1000] and sizes == [4096]
    with pytest.raises(CudnnUnsupported, match="needs 4096 bytes of workspace"):
        cudnn_runner.CudnnConvRunner("h").run(graph, {}, 0)
