"""cuDNN convolution calls on the GPU: a `ConvGraph` built as a `cudnn.pygraph` and executed.

Where it sits: the cuda platform's cuDNN calls (`backends.cuda.CudaDevice.cudnn_convolution` runs
each CudnnConvolutionThunk of a manifest here). `hlo_common.gpu.cudnn_graph.describe_call` made
the graph description at compile time (pure data, tested without a GPU); this module is the thin
part that needs
the `gpu` extra (`nvidia-cudnn-frontend`, `nvidia-cudnn-cu12`) and a GPU: it imports `cudnn`
on first use only. `build_pygraph` writes the description into a `cudnn.pygraph` (tensors with
dims, strides and types; the convolution with padding, stride, dilation and mode; the fused
scale / side-input / bias / activation steps; the result marked as the output);
`CudnnConvRunner` builds plans with heuristics mode A (falling back to the fallback list, as
XLA's cuda_dnn.cc does), caches them per `ConvGraph.key` (per shape), and executes them with
the call's scratch buffer as the workspace.

    runner = CudnnConvRunner(handle)
    runner.run(graph, {"image": x_ptr, "weight": w_ptr, "bias": b_ptr, "output": y_ptr}, scratch_ptr)

Pointers are device addresses (ints); the tensors' names in the dict are the descriptions'
names. The pieces of the frontend used: pygraph(io_data_type, intermediate_data_type,
compute_data_type, handle), tensor(name, dim, stride, data_type), conv_fprop / conv_dgrad /
conv_wgrad(..., pre_padding, post_padding, stride, dilation, convolution_mode), scale, add,
bias, relu (upper_clip), elu, leaky_relu, sigmoid, tanh; build_operation_graph,
create_execution_plans([heur_mode.A, heur_mode.FALLBACK]), check_support, build_plans,
get_workspace_size, execute(tensor_dict, workspace, handle).
"""

from __future__ import annotations

from hlo_common.gpu.cudnn_graph import ConvGraph, CudnnUnsupported, TensorDesc


def _cudnn():
    import cudnn  # the gpu extra's nvidia-cudnn-frontend

    return cudnn


def build_pygraph(desc: ConvGraph, handle=None):
    """(the cudnn.pygraph of `desc`, {tensor name: its graph tensor, or (tensor, value) for a
    by-value scale}); not yet validated."""
    cudnn = _cudnn()
    dt = cudnn.data_type
    graph = cudnn.pygraph(io_data_type=getattr(dt, desc.io_data_type),
                          intermediate_data_type=getattr(dt, desc.compute_data_type),
                          compute_data_type=getattr(dt, desc.compute_data_type), handle=handle)
    tensors: dict = {}

    def tensor(d: TensorDesc):
        tensors[d.name] = graph.tensor(name=d.name, dim=list(d.dims), stride=list(d.strides),
                                       data_type=getattr(dt, d.data_type))
        return tensors[d.name]

    args = [tensor(d) for _, d in desc.inputs]
    options = dict(pre_padding=list(desc.pre_padding), post_padding=list(desc.post_padding),
                   stride=list(desc.stride), dilation=list(desc.dilation),
                   compute_data_type=getattr(dt, desc.compute_data_type))
    if desc.convolution_mode != "CROSS_CORRELATION":
        options["convolution_mode"] = desc.convolution_mode
    y = getattr(graph, desc.operation)(*args, **options)
    if desc.operation != "conv_fprop":  # dgrad / wgrad outputs cannot be inferred from the inputs
        y.set_dim(list(desc.output.dims)).set_stride(list(desc.output.strides))
    for step in desc.pointwise:
        y = _pointwise(graph, step, y, tensor, tensors, len(desc.output.dims))
    y.set_output(True).set_dim(list(desc.output.dims)).set_stride(list(desc.output.strides))
    y.set_data_type(getattr(dt, desc.output.data_type))
    tensors[desc.output.name] = y
    return graph, tensors


def _scalar(graph, tensors: dict, name: str, value: float, rank: int):
    """A by-value f32 scalar tensor (a scale), its value kept in `tensors` under `name`."""
    import numpy as np

    t = graph.tensor(name=name, dim=[1] * rank, stride=[1] * rank, data_type=_cudnn().data_type.FLOAT,
                     is_pass_by_value=True)
    tensors[name] = (t, np.full((1,) * rank, value, np.float32))
    return t


def _pointwise(graph, step, y, tensor, tensors: dict, rank: int):
    if step.op == "scale":
        return graph.scale(y, _scalar(graph, tensors, "conv_result_scale", step.value, rank))
    if step.op == "add":
        side = tensor(step.tensor)
        if step.value != 1:
            side = graph.scale(side, _scalar(graph, tensors, "side_input_scale", step.value, rank))
        return graph.add(y, side)
    if step.op == "bias":
        return graph.bias(y, tensor(step.tensor))
    if step.op == "relu":
        return graph.relu(y)
    if step.op == "relu6":
        return graph.relu(y, lower_clip=0.0, upper_clip=step.value)
    if step.op == "leaky_relu":
        return graph.leaky_relu(y, negative_slope=step.value)
    if step.op in ("elu", "sigmoid", "tanh"):
        return getattr(graph, step.op)(y)
    raise CudnnUnsupported(f"no cuDNN pointwise step {step.op!r}")


def make_handle(stream: int = 0):
    """A cuDNN handle whose work goes on `stream` (a CUstream as an int; 0: the default stream)."""
    cudnn = _cudnn()
    handle = cudnn.create_handle()
    if stream:
        cudnn.set_stream(handle=handle, stream=stream)
    return handle


class CudnnConvRunner:
    """Built cuDNN plans per graph key, executed on the handle's stream."""

    def __init__(self, handle, scratch=None):
        self.handle = handle
        # scratch(bytes) -> a device pointer of at least that many bytes: the workspace of a plan
        # that needs more than the call's scratch buffer (XLA sizes it when autotuning; calls
        # written before autotuning, hlo-opt's among them, have u8[0]); None: such a plan is refused
        self.scratch = scratch
        self._plans: dict[tuple, tuple] = {}

    def plan(self, desc: ConvGraph):
        """(graph, tensors, workspace bytes) of `desc`, built on first use (heuristics mode A)."""
        cached = self._plans.get(desc.key)
        if cached is None:
            cudnn = _cudnn()
            graph, tensors = build_pygraph(desc, self.handle)
            graph.validate()
            graph.build_operation_graph()
            graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            graph.check_support()
            graph.build_plans()
            need = graph.get_workspace_size()
            if need > desc.workspace_bytes and self.scratch is None:
                raise CudnnUnsupported(f"the cuDNN plan needs {need} bytes of workspace; the call's "
                                       f"scratch buffer has {desc.workspace_bytes}")
            cached = self._plans[desc.key] = (graph, tensors, need)
        return cached

    def run(self, desc: ConvGraph, pointers: dict[str, int], workspace: int) -> None:
        """Execute `desc` on device buffers: `pointers` by tensor name, `workspace` the scratch."""
        graph, tensors, need = self.plan(desc)
        if need > desc.workspace_bytes:
            workspace = self.scratch(need)
        values = {t[0]: t[1] for t in tensors.values() if isinstance(t, tuple)}
        values.update({tensors[name]: pointers[name] for name in tensors if name in pointers})
        graph.execute(values, workspace, handle=self.handle)
