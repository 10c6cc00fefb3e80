"""The cuDNN convolution thunk of a manifest (the cuda target's `__cudnn$conv*` calls).

Part of the manifest schema (`hlo_common.manifest`, looked up by `thunks.thunk_from_json`), as
XLA's ConvolutionThunk (xla/backends/gpu/runtime/convolution_thunk.cc) calls cuDNN for one of
XLA:GPU's convolution custom calls:

    CudnnConvolutionThunk  kind "kCudnnConvolution": the cuDNN graph of the call (the JSON of
                           `hlo_common.gpu.cudnn_graph.ConvGraph`: operation, tensors with dims,
                           strides and types, padding, stride, dilation, fused pointwise steps),
                           one slice per graph tensor by its name ("image", "weight", "loss",
                           "filter", "bias", "side_input", "output") and the call's scratch
                           buffer as cuDNN's workspace

hlo-codegen writes it for the cuda target (`cudnn-conv-fallback` keeps the calls cuDNN can take);
hlo-run's cuda platform builds the graph once per shape and executes it
(`hlo_run.cudnn_runner`); the other platforms refuse it.

    >>> t = CudnnConvolutionThunk("c", {"operation": "conv_fprop", "inputs": [], "output": {}},
    ...                           (("image", BufferSlice(0, 0, 8)),), None)
    >>> CudnnConvolutionThunk.from_json(JsonReader(t.to_json(), "t")) == t
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hlo_common.manifest.json_reader import JsonReader, ManifestError
from hlo_common.manifest.thunks import BufferSlice, _slice

GRAPH_KEYS = ("operation", "inputs", "output")  # what every graph description has


@dataclass(frozen=True)
class CudnnConvolutionThunk:
    profile_annotation: str
    graph: dict[str, Any]  # ConvGraph.to_json()
    buffers: tuple[tuple[str, BufferSlice], ...]  # graph tensor name -> its slice
    workspace: BufferSlice | None
    kind = "kCudnnConvolution"

    def __hash__(self) -> int:  # the graph is a dict: hash what identifies the thunk
        return hash((self.profile_annotation, self.buffers, self.workspace))

    def to_json(self) -> dict:
        out = {"kind": self.kind, "profile_annotation": self.profile_annotation, "graph": self.graph,
               "buffers": {name: s.to_json() for name, s in self.buffers}}
        if self.workspace is not None:
            out["workspace"] = self.workspace.to_json()
        return out

    @staticmethod
    def from_json(r: JsonReader) -> CudnnConvolutionThunk:
        graph = r.obj("graph").data
        missing = [k for k in GRAPH_KEYS if k not in graph]
        if missing:
            raise ManifestError(f"{r.path}.graph: missing {', '.join(repr(k) for k in missing)}")
        try:
            json.dumps(graph)
        except (TypeError, ValueError) as exc:
            raise ManifestError(f"{r.path}.graph: not JSON data ({exc})") from None
        buffers = r.obj("buffers")
        slices = tuple((str(name), BufferSlice.from_json(v, f"{buffers.path}.{name}"))
                       for name, v in sorted(buffers.data.items()))
        return CudnnConvolutionThunk(r.str("profile_annotation"), graph, slices, _slice(r, "workspace", True))

    def describe(self) -> str:
        named = ", ".join(f"{name}={s}" for name, s in self.buffers)
        return f"profile_annotation={self.profile_annotation}, {self.graph.get('operation')}, {named}"

    def slices(self) -> list[BufferSlice]:
        return [s for _, s in self.buffers] + ([self.workspace] if self.workspace is not None else [])


CUDNN_THUNK_KINDS = {CudnnConvolutionThunk.kind: CudnnConvolutionThunk.from_json}
