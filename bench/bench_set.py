"""The bench set: the modules the host and interpreter benchmarks time against XLA:CPU.

`bench/bench_host.py` and `bench/bench_interpreter.py` run these by default (a module path given on
their command line replaces the set). Each entry names a module file under `testdata/` and what
it stands for; the set covers elementwise chains in bf16 (GELU), normalizations (layer norm in
f32 and in bf16 at 12.6M elements, softmax in f32 and bf16), GEMMs (an MLP block in f32 and bf16,
a transformer layer forward) and convolutions (a conv + bias + relu block, NHWC; a ResNet basic
block, a depthwise convolution and a weight gradient, issue 20).
`testdata/bench/make_modules.py` makes the modules that live under `testdata/bench/`.

    .venv/bin/python bench/bench_set.py      # list the set: name, elements, file

Run as a script (as `bench/run_all.py` does with every `bench_*.py`) it prints the list.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTDATA = ROOT / "testdata"


@dataclass(frozen=True)
class BenchModule:
    name: str
    path: Path
    what: str


BENCH_SET: tuple[BenchModule, ...] = (
    BenchModule("gelu_bf16", TESTDATA / "gelu.hlo",
                "GELU (tanh form) of the emitters document, bf16[6,512,4096]"),
    BenchModule("layernorm_f32", TESTDATA / "fusion" / "layernorm_f32.hlo", "layer norm, f32[4096,1024]"),
    BenchModule("layernorm_bf16", TESTDATA / "bench" / "layernorm_bf16.hlo", "layer norm, bf16[6,512,4096]"),
    BenchModule("softmax_f32", TESTDATA / "fusion" / "softmax_f32.hlo", "softmax over rows, f32[4096,1024]"),
    BenchModule("softmax_bf16", TESTDATA / "fusion" / "softmax_bf16.hlo",
                "softmax over rows, bf16[4096,1024]"),
    BenchModule("mlp_f32", TESTDATA / "fusion" / "mlp_f32.hlo",
                "MLP block, two GEMMs [2048,512]x[512,2048]x[2048,512], bias, GELU, f32"),
    BenchModule("mlp_bf16", TESTDATA / "fusion" / "mlp_bf16.hlo", "the MLP block in bf16"),
    BenchModule("transformer_layer", TESTDATA / "transformer_layer.hlo",
                "JAX transformer layer forward, f32 [2,256,512], 8 heads, MLP 2048"),
    BenchModule("conv_block", TESTDATA / "bench" / "conv_block.hlo",
                "two 3x3 conv + bias + relu, NHWC f32[8,32,32,32] -> [8,32,32,64]"),
    BenchModule("resnet_block", TESTDATA / "bench" / "resnet_block.hlo",
                "ResNet basic block: two 3x3 conv + folded-BN bias + relu + residual, NHWC f32[8,56,56,64]"),
    BenchModule("depthwise_conv", TESTDATA / "bench" / "depthwise_conv.hlo",
                "depthwise 3x3 conv (128 groups) + bias + relu, NHWC f32[8,56,56,128]"),
    BenchModule("conv_wgrad", TESTDATA / "bench" / "conv_wgrad.hlo",
                "weight gradient of a 3x3 conv (jax.grad), x, dy f32[8,56,56,64] -> [3,3,64,64]"),
)
# The convolution modules as XLA:GPU optimizes them (`__cudnn$conv*` custom calls, which
# hlo-codegen's cudnn-conv-fallback lowers for the host): `bench_host.py --cudnn` times these,
# with XLA:CPU running the jax form beside each.
CUDNN_SET: tuple[Path, ...] = tuple(TESTDATA / "bench" / f"{name}.xla_gpu.hlo" for name in
                                    ("conv_block", "resnet_block", "depthwise_conv", "conv_wgrad"))


def paths() -> list[Path]:
    """The module files of the set, in order."""
    return [m.path for m in BENCH_SET]


def largest_array(module) -> int:
    """Elements of the module's largest entry parameter or result array (the size column)."""
    entry = module.entry
    shapes = [p.shape for p in entry.parameters] + [entry.root.shape]
    leaves = [s for shape in shapes for _, s in shape.leaf_shapes()]
    return max((s.num_elements for s in leaves if s.is_array), default=0)


def main() -> int:
    from hlo_common.hlo.parser import parse_module

    print(f"{'name':<18} {'elements':>11}  {'file':<36} what")
    for m in BENCH_SET:
        module = parse_module(m.path.read_text(), str(m.path))
        print(f"{m.name:<18} {largest_array(module):>11,}  {str(m.path.relative_to(ROOT)):<36} {m.what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
