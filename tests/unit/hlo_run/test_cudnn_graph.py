"""The cuda platform's translation of `__cudnn$conv*` calls into cuDNN graphs (hlo_run.cudnn_graph),
checked without a GPU: for every cuDNN call XLA:GPU wrote into testdata/cudnn and testdata/bench
(and calls of our own for what those lack: reversed windows, other layouts, scales and
activations), the tensors' dims and strides, the window and groups, the types and fused steps
equal values worked out here from the HLO text alone; and the description, evaluated by a small
numpy convolution that reads the operands' buffers through the described dims and strides,
equals the interpreter's result for the same call."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.gpu.cudnn_graph import ConvGraph, CudnnUnsupported, describe_call

ROOT = Path(__file__).resolve().parents[3] / "testdata"
FILES = sorted((ROOT / "cudnn").glob("*.xla_gpu.hlo")) + sorted((ROOT / "bench").glob("*.xla_gpu.hlo"))
CALL = re.compile(r"^\s*(?:ROOT )?%?(\S+) = (\(.*?\)) custom-call\(([^)]*)\), (.*custom_call_target="
                  r"\"__cudnn\$conv\w+\".*)$", re.M)


def _calls(text: str) -> list[tuple[str, str, list[str], str]]:
    """(name, result shape, operand names, attributes) of every cuDNN call in a module's text."""
    return [(m[1], m[2], [o.strip().lstrip("%") for o in m[3].split(",")], m[4]) for m in CALL.finditer(text)]


CALLS = {f"{path.name[:-len('.xla_gpu.hlo')]}/{call[0]}": (path, call)
         for path in FILES for call in _calls(path.read_text())}


def _instruction(path: Path, name: str):
    module = parse_module(path.read_text(), path.name)
    return next(i for c in module.computations for i in c.instructions if i.name == name)


# -- the expected values, from the text: dim_labels characters, layouts, the window string ----------------
def _labels(attrs: str) -> tuple[str, str, str]:
    lhs, rest = re.search(r"dim_labels=(\w+)->(\w+)", attrs).groups()
    return lhs.split("_")[0], lhs.split("_")[1], rest


def _cudnn_order(labels: str, kernel: bool) -> list[int]:
    """HLO dims in cuDNN's order: [N, C, spatial...] or for a filter [K (o), C (i), spatial...]."""
    first, second = ("o", "i") if kernel else ("b", "f")
    spatial = sorted((c for c in labels if c.isdigit()), key=int)
    return [labels.index(first), labels.index(second)] + [labels.index(c) for c in spatial]


def _strides(shape) -> list[int]:
    """Element strides per logical dim: numpy's strides of the physical (major-to-minor) array
    transposed back to logical order."""
    major_to_minor = list(reversed(shape.minor_to_major))
    physical = np.empty([shape.dims[d] for d in major_to_minor], np.int8)
    return list(physical.transpose(np.argsort(major_to_minor)).strides)


def _window(attrs: str, rank: int) -> dict[str, list[int]]:
    text = re.search(r"window=\{([^}]*)\}", attrs)[1]
    fields = dict(f.split("=") for f in text.split())
    parts = {k: [int(v) for v in fields[k].split("x")] if k in fields else [1] * rank
             for k in ("stride", "rhs_dilate")}
    pads = [p.split("_") for p in fields["pad"].split("x")] if "pad" in fields else [["0", "0"]] * rank
    return {"pre": [int(a) for a, _ in pads], "post": [int(b) for _, b in pads], **parts}


ROLES = {"__cudnn$convForward": ("lhs", "rhs", "out"),  # the labels of (operand 0, operand 1, result)
         "__cudnn$convBiasActivationForward": ("lhs", "rhs", "out"),
         "__cudnn$convBackwardInput": ("out", "rhs", "lhs"),
         "__cudnn$convBackwardFilter": ("lhs", "out", "rhs")}
TYPES = {"f32": "FLOAT", "f16": "HALF", "bf16": "BFLOAT16", "f64": "DOUBLE", "s8": "INT8"}


@pytest.mark.parametrize("key", sorted(CALLS))
def test_tensors_window_and_steps_equal_the_hlo_text(key):
    path, (name, _, _, attrs) = CALLS[key]
    _check_structure(_instruction(path, name), attrs)


def _check_structure(instr, attrs: str) -> None:
    graph = describe_call(instr)
    lhs, rhs, out = _labels(attrs)
    labels = {"lhs": lhs, "rhs": rhs, "out": out}
    target = re.search(r'custom_call_target="([^"]+)"', attrs)[1]
    roles = ROLES[target]
    shapes = [instr.operands[0].shape, instr.operands[1].shape, instr.shape.tuple_shapes[0]]
    for (port, desc), role, shape in zip(graph.inputs + (("result", graph.output),), roles, shapes):
        order = _cudnn_order(labels[role], kernel=role == "rhs")
        assert list(desc.dims) == [shape.dims[d] for d in order], port
        assert list(desc.strides) == [_strides(shape)[d] for d in order], port
        assert desc.data_type == TYPES[shape.element_type.name], port
    window = _window(attrs, len(graph.stride))
    assert (list(graph.pre_padding), list(graph.post_padding)) == (window["pre"], window["post"])
    assert (list(graph.stride), list(graph.dilation)) == (window["stride"], window["rhs_dilate"])
    groups = re.search(r"feature_group_count=(\d+)", attrs)
    assert graph.groups == (int(groups[1]) if groups else 1)
    x_channels = (graph.inputs[0][1] if graph.operation != "conv_dgrad" else graph.output).dims[1]
    filter_channels = (graph.output if graph.operation == "conv_wgrad" else graph.inputs[1][1]).dims[1]
    assert x_channels == filter_channels * graph.groups  # how cuDNN infers the groups
    assert graph.operation == {"lhs": "conv_dgrad", "rhs": "conv_wgrad", "out": "conv_fprop"}[roles[2]]
    assert graph.workspace_bytes == int(re.search(r"u8\[(\d+)\]", str(instr.shape))[1])
    assert [s.op for s in graph.pointwise] == _expected_steps(attrs, len(instr.operands))


def _expected_steps(attrs: str, operands: int) -> list[str]:
    if "convBiasActivationForward" not in attrs:
        return []
    scale = re.search(r'"conv_result_scale":([-\d.e]+)', attrs)
    activation = re.search(r'"activation_mode":"(\w+)"', attrs)[1]
    steps = ["scale"] if scale and float(scale[1]) != 1 else []
    steps += ["add"] * (operands > 3) + ["bias"] * (operands > 2)
    names = {"kRelu": "relu", "kRelu6": "relu6", "kElu": "elu", "kLeakyRelu": "leaky_relu", "kNone": None}
    return steps + ([names[activation]] if names[activation] else [])


def test_the_calls_cover_every_operation_and_fused_step():
    graphs = [describe_call(_instruction(path, call[0])) for path, call in CALLS.values()]
    assert {g.operation for g in graphs} == {"conv_fprop", "conv_dgrad", "conv_wgrad"}
    assert {s.op for g in graphs for s in g.pointwise} >= {"scale", "add", "bias", "relu"}
    assert any(g.groups > 1 for g in graphs) and any(len(g.stride) == 3 for g in graphs)
    assert len(graphs) >= 40


# -- numerically: the description evaluated by numpy against the interpreter ---------------------------
def _one_call_module(instr, attrs: str) -> str:
    params = "".join(f"  p{i} = {o.shape} parameter({i})\n" for i, o in enumerate(instr.operands))
    operands = ", ".join(f"p{i}" for i in range(len(instr.operands)))
    return (f"HloModule one\n\nENTRY e {{\n{params}  c = {instr.shape} custom-call({operands}), {attrs}\n"
            f"  ROOT g = {instr.shape.tuple_shapes[0]} get-tuple-element(c), index=0\n}}\n")


def _buffer(values: np.ndarray, shape) -> np.ndarray:
    """The flat buffer of logical `values` in `shape`'s layout (major to minor)."""
    return np.ascontiguousarray(values.transpose(list(reversed(shape.minor_to_major)))).reshape(-1)


def _read(buffer: np.ndarray, desc) -> np.ndarray:
    """A tensor as cuDNN reads it: the buffer through the description's dims and strides."""
    strides = [s * buffer.itemsize for s in desc.strides]
    return np.lib.stride_tricks.as_strided(buffer, desc.dims, strides).astype(np.float64)


def _taps(graph: ConvGraph, x_dims, y_dims, kernel_dims):
    """(tap index, slices of the padded input it reads for every output position)."""
    for tap in np.ndindex(*kernel_dims[2:]):
        yield tap, (slice(None), slice(None)) + tuple(
            slice(t * d, t * d + (n - 1) * s + 1, s)
            for t, d, s, n in zip(tap, graph.dilation, graph.stride, y_dims[2:]))


def _padded(x: np.ndarray, graph: ConvGraph) -> np.ndarray:
    return np.pad(x, [(0, 0), (0, 0)] + list(zip(graph.pre_padding, graph.post_padding)))


def _conv(graph: ConvGraph, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cuDNN's operation on NC... arrays in float64 (groups along C and K; mode CONVOLUTION
    flips the filter), written out tap by tap."""
    g = graph.groups
    if graph.operation == "conv_fprop":
        x, w = a, b
        y_dims = graph.output.dims
    elif graph.operation == "conv_dgrad":
        y, w = a, b
        x, y_dims = np.zeros(graph.output.dims), a.shape
    else:
        x, y = a, b
        w, y_dims = np.zeros(graph.output.dims), b.shape
    if graph.convolution_mode == "CONVOLUTION":
        w = np.flip(w, tuple(range(2, w.ndim)))
    xp = _padded(x, graph)
    n, c, k = x.shape[0], x.shape[1], w.shape[0]
    result = np.zeros(y_dims) if graph.operation == "conv_fprop" else None
    for tap, index in _taps(graph, x.shape, y_dims, w.shape):
        wt = w[(slice(None), slice(None)) + tap].reshape(g, k // g, c // g)
        if graph.operation == "conv_fprop":
            xs = xp[index].reshape((n, g, c // g) + tuple(y_dims[2:]))
            result += np.einsum("ngc...,gkc->ngk...", xs, wt).reshape(result.shape)
        elif graph.operation == "conv_dgrad":
            dy = y.reshape((n, g, k // g) + tuple(y_dims[2:]))
            xp[index] += np.einsum("ngk...,gkc->ngc...", dy, wt).reshape(xp[index].shape)
        else:
            xs = xp[index].reshape(n, g, c // g, -1)
            dy = y.reshape(n, g, k // g, -1)
            w[(slice(None), slice(None)) + tap] = np.einsum("ngcp,ngkp->gkc", xs, dy).reshape(k, c // g)
    if graph.operation == "conv_dgrad":
        inner = tuple(slice(p, p + s) for p, s in zip(graph.pre_padding, x.shape[2:]))
        return xp[(slice(None), slice(None)) + inner]
    if graph.operation == "conv_wgrad":
        return np.flip(w, tuple(range(2, w.ndim))) if graph.convolution_mode == "CONVOLUTION" else w
    return result


def _steps(graph: ConvGraph, y: np.ndarray, buffers: dict) -> np.ndarray:
    for step in graph.pointwise:
        if step.op == "scale":
            y = y * step.value
        elif step.op in ("add", "bias"):
            y = y + (step.value if step.op == "add" else 1) * _read(buffers[step.tensor.operand], step.tensor)
        elif step.op in ("relu", "relu6"):
            y = np.clip(y, 0, step.value)
        elif step.op == "elu":
            y = np.where(y > 0, y, np.expm1(np.minimum(y, 0)))
        elif step.op == "leaky_relu":
            y = np.where(y > 0, y, y * step.value)
        else:
            raise AssertionError(step.op)
    if graph.output.data_type == "INT8":  # cuDNN's int8 output: nearest even, saturated
        y = np.clip(np.rint(y), -128, 127)
    return y


def _random(rng, shape) -> np.ndarray:
    if shape.element_type.is_integer:
        return rng.integers(-8, 9, shape.dims).astype(shape.element_type.np_dtype)
    return rng.uniform(-1, 1, shape.dims).astype(shape.element_type.np_dtype)


def _check_numerically(instr, attrs: str, seed: int = 3) -> None:
    graph = describe_call(instr)
    rng = np.random.default_rng(seed)
    args = [_random(rng, o.shape) for o in instr.operands]
    want = np.asarray(evaluate(parse_module(_one_call_module(instr, attrs), "one"), args))
    buffers = {i: _buffer(a, o.shape) for i, (a, o) in enumerate(zip(args, instr.operands))}
    a, b = (_read(buffers[d.operand], d) for _, d in graph.inputs)
    got = _steps(graph, _conv(graph, a, b), buffers)
    expected = _read(_buffer(want, instr.shape.tuple_shapes[0]), graph.output)
    wide = want.dtype in (ml_dtypes.bfloat16, np.float16)
    np.testing.assert_allclose(got, expected, rtol=2 ** -7 if wide else 1e-4, atol=2e-2 if wide else 1e-4)


@pytest.mark.parametrize("key", sorted(k for k, (p, _) in CALLS.items() if p.parent.name == "cudnn"))
def test_the_description_computes_what_the_interpreter_does(key):
    path, (name, _, _, attrs) = CALLS[key]
    _check_numerically(_instruction(path, name), attrs)


# calls of our own: layouts, reversed windows, scales and activations the testdata lack
OWN = "HloModule own\n\nENTRY e {{\n{params}  ROOT c = {result} custom-call({operands}), {attrs}\n}}\n"
CONFIG = ('backend_config={{"cudnn_conv_backend_config":{{"activation_mode":"{act}",'
          '"conv_result_scale":{scale},"side_input_scale":{side},"leakyrelu_alpha":0.25}}}}')
OWN_CALLS = {  # name: (operand shapes, result shape, target, window and dim_labels, groups, config)
    "nchw_layout_leaky": (["f32[2,6,9,8]{1,3,2,0}", "f32[3,3,6,8]{3,2,1,0}", "f32[8]{0}",
                           "f32[2,8,9,8]{3,2,1,0}"],
                          "f32[2,8,9,8]{1,3,2,0}", "BiasActivationForward", "window={size=3x3 pad=1_1x1_1}, "
                          "dim_labels=bf01_01io->bf01", 1, ("kLeakyRelu", 0.5, 0.75)),
    "elu_grouped_strided": (["f32[2,9,9,8]", "f32[3,3,4,6]", "f32[6]"], "f32[2,5,5,6]",
                            "BiasActivationForward",
                            "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f", 2,
                            ("kElu", 1, 0)),
    "relu6_dilated_f16": (["f16[2,10,10,4]", "f16[8,4,3,3]", "f16[8]"], "f16[2,6,6,8]",
                          "BiasActivationForward", "window={size=3x3 rhs_dilate=2x2}, "
                          "dim_labels=b01f_oi01->b01f", 1, ("kRelu6", 1, 0)),
    "side_input_other_labels": (["f32[2,6,6,4]", "f32[3,3,4,8]", "f32[8]", "f32[2,8,6,6]"], "f32[2,8,6,6]",
                                "BiasActivationForward", "window={size=3x3 pad=1_1x1_1}, "
                                "dim_labels=b01f_01io->bf01", 1, ("kRelu", 1, 0.5)),
    "forward_asymmetric_pad": (["f32[1,7,6,3]", "f32[3,3,3,4]"], "f32[1,7,5,4]", "Forward",
                               "window={size=3x3 pad=0_2x1_0}, dim_labels=b01f_01io->b01f", 1, None),
    "forward_reversed": (["f32[2,7,7,4]", "f32[3,2,4,5]"], "f32[2,7,8,5]", "Forward", "window={size=3x2 "
                         "pad=1_1x1_1 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f", 1, None),
    "dgrad_grouped_strided": (["f32[2,4,4,6]", "f32[3,3,4,6]"], "f32[2,8,8,8]", "BackwardInput",
                              "window={size=3x3 stride=2x2 pad=1_0x1_0}, "
                              "dim_labels=b01f_01io->b01f", 2, None),
    "wgrad_dilated_nchw": (["f32[2,4,9,9]", "f32[2,6,5,5]"], "f32[6,4,3,3]", "BackwardFilter",
                           "window={size=3x3 pad=0_0x0_0 rhs_dilate=2x2}, "
                           "dim_labels=bf01_oi01->bf01", 1, None),
}


def _own_call(name: str):
    operands, result, target, window, groups, config = OWN_CALLS[name]
    attrs = f'{window}, feature_group_count={groups}, custom_call_target="__cudnn$conv{target}"'
    if config:
        act, scale, side = config
        attrs += ", " + CONFIG.format(act=act, scale=scale, side=side)
    params = "".join(f"  p{i} = {s} parameter({i})\n" for i, s in enumerate(operands))
    text = OWN.format(params=params, result=f"({result}, u8[64]{{0}})",
                      operands=", ".join(f"p{i}" for i in range(len(operands))), attrs=attrs)
    module = parse_module(text, name)
    return module.entry.root, attrs


@pytest.mark.parametrize("name", sorted(OWN_CALLS))
def test_calls_of_our_own_compute_what_the_interpreter_does(name):
    instr, attrs = _own_call(name)
    graph = describe_call(instr)
    assert graph.workspace_bytes == 64
    assert graph.convolution_mode == ("CONVOLUTION" if "reversal" in attrs else "CROSS_CORRELATION")
    _check_structure(instr, attrs)
    _check_numerically(instr, attrs)


@pytest.mark.parametrize("window, extra, message", [
    ("window={size=3x3 pad=-1_1x1_1}", "", "negative padding"),
    ("window={size=3x3 pad=1_1x1_1 lhs_dilate=2x1}", "", "lhs_dilate"),
    ("window={size=3x3 pad=1_1x1_1 rhs_reversal=1x0}", "", "whole window or none"),
    ("window={size=3x3 pad=1_1x1_1}", ", batch_group_count=2", "batch_group_count"),
])
def test_what_cudnn_cannot_take_is_refused_naming_the_call(window, extra, message):
    text = OWN.format(params="  p0 = f32[2,6,6,4] parameter(0)\n  p1 = f32[3,3,4,8] parameter(1)\n",
                      result="(f32[2,6,6,8], u8[0])", operands="p0, p1",
                      attrs=f"{window}, dim_labels=b01f_01io->b01f{extra}, "
                            'custom_call_target="__cudnn$convForward"')
    with pytest.raises(CudnnUnsupported, match=f"^c: .*{message}"):
        describe_call(parse_module(text, "bad").entry.root)


def test_integer_operands_of_other_types_are_refused():
    text = OWN.format(params="  p0 = s8[2,6,6,4] parameter(0)\n  p1 = f32[3,3,4,8] parameter(1)\n",
                      result="(f32[2,6,6,8], u8[0])", operands="p0, p1",
                      attrs='window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, '
                            'custom_call_target="__cudnn$convForward"')
    with pytest.raises(CudnnUnsupported, match="INT8/FLOAT operands"):
        describe_call(parse_module(text, "bad").entry.root)


def test_the_plan_key_follows_the_shapes_not_the_names():
    graphs = {key: describe_call(_instruction(path, call[0])) for key, (path, call) in CALLS.items()}
    same = graphs["grad_depthwise/cudnn-conv.2"], graphs["grad_depthwise/cudnn-conv.3"]  # equal shapes
    assert same[0].key == same[1].key
    fused = (graphs["resnet_block/cudnn-conv-bias-activation.8"],
             graphs["resnet_block/cudnn-conv-bias-activation.9"])
    assert fused[0].key != fused[1].key  # equal shapes, the second adds the residual
    keys = {g.key for g in graphs.values()}
    distinct = {(g.operation, g.inputs, g.output, g.stride, g.dilation, g.pre_padding, g.pointwise)
                for g in graphs.values()}
    assert len(keys) == len(distinct)


def test_the_frontend_takes_the_description():
    """With the gpu extra's cudnn frontend installed, every description becomes a cudnn.pygraph
    whose nodes carry the described padding, stride, dilation and tensors (validating the graph
    needs the CUDA driver, so it stops short of that)."""
    pytest.importorskip("cudnn", reason="the gpu extra's nvidia-cudnn-frontend is not installed")
    from hlo_run.cudnn_runner import build_pygraph

    for key, (path, call) in sorted(CALLS.items()):
        desc = describe_call(_instruction(path, call[0]))
        graph, tensors = build_pygraph(desc)
        conv = graph.nodes[0]
        assert conv.name.startswith(desc.operation), key
        assert conv.params["pre_padding"] == list(desc.pre_padding), key
        assert conv.params["stride"] == list(desc.stride) and conv.params["dilation"] == list(desc.dilation)
        for _, d in desc.inputs:
            assert (tensors[d.name].dim, tensors[d.name].stride) == (list(d.dims), list(d.strides)), key
        assert len(graph.nodes) == 1 + sum(1 + (s.op == "add" and s.value != 1) for s in desc.pointwise)
        assert tensors["output"].stride == list(desc.output.strides), key
