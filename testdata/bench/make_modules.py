"""Regenerate the bench set's own modules: `testdata/bench/<name>.hlo` (see `bench/bench_set.py`).

The rest of the bench set lives in `testdata/` and `testdata/fusion/`; these are the modules it
adds: a bf16 layer norm as large as the GELU of the emitters document (12.6M elements), and a
small convolution block (two 3x3 convolutions, NHWC activations, HWIO kernels, each followed by
a bias add and a relu, as `flax.linen.Conv` and `jax.nn.relu` make it), and the convolutions of
issue 20 (a ResNet basic block, a depthwise convolution, a weight gradient), and the GPU bench's
library-call rows (`bench/bench_gpu.py`: a ResNet-50 stage in bf16 at batch 32, issue 20; bf16
GEMMs of 2048^3 and 4096^3, issue 18; too large for the host benches). They are lowered by jax
to pre-optimization HLO text with default layouts, as `testdata/fusion/make_modules.py` does
(whose building blocks and lowering this script reuses); weights are entry parameters, so
hlo-run makes them from --seed.

    .venv/bin/python testdata/bench/make_modules.py            # every module
    .venv/bin/python testdata/bench/make_modules.py -k conv    # only matching names
    .venv/bin/python testdata/bench/make_modules.py --xla-gpu-target h100_sxm.txtpb  # + XLA:GPU forms

The output is the same on every run with the same jax version (0.10.2). With --xla-gpu-target
the convolution modules are also written as XLA:GPU's deviceless compile optimizes them
(`testdata/xla_gpu_compile.py`: jax's CUDA plugin, no GPU), so the host runs XLA's own
`__cudnn$conv*` calls (`bench/bench_host.py` times them against XLA:CPU on the jax form).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax

HERE = Path(__file__).resolve().parent


def _fusion_generator():
    """testdata/fusion/make_modules.py as a module (its layer_norm, spec and layout rewrite)."""
    path = HERE.parent / "fusion" / "make_modules.py"
    spec = importlib.util.spec_from_file_location("fusion_make_modules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FUSION = _fusion_generator()
f32, bf16 = jnp.float32, jnp.bfloat16
spec = FUSION.spec


def conv_bias_relu(x, w, b):
    """One NHWC convolution (HWIO kernel, stride 1, SAME padding), a bias add and a relu."""
    y = lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y + b)


def conv_block(x, w1, b1, w2, b2):
    return conv_bias_relu(conv_bias_relu(x, w1, b1), w2, b2)


def _conv(x, w, groups=1):
    return lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)


def resnet_block(x, w1, b1, w2, b2):
    """A ResNet basic block at inference: two 3x3 convolutions, batch norm folded into their
    weights and a bias, relu after the first and after the residual add."""
    h = jax.nn.relu(_conv(x, w1) + b1)
    return jax.nn.relu(_conv(h, w2) + b2 + x)


def depthwise_conv(x, w, b):
    """A depthwise 3x3 convolution (one group per channel, as MobileNet's), a bias and a relu."""
    return jax.nn.relu(_conv(x, w, groups=x.shape[-1]) + b)


def conv_wgrad(x, w, dy):
    """The weight gradient of a 3x3 convolution as jax.grad makes it (a backward-filter
    convolution: x against the output gradient dy over the batch and spatial dims)."""
    return jax.grad(lambda w: jnp.sum(_conv(x, w) * dy))(w)


def bottleneck(x, w1, b1, w2, b2, w3, b3, wp=None, bp=None):
    """A ResNet-50 bottleneck block at inference (batch norm folded into weights and a bias): 1x1
    down to the block's width, 3x3, 1x1 up, relu after each and after the residual add; the first
    block of a stage projects its input with one more 1x1 convolution."""
    h = jax.nn.relu(_conv(x, w1) + b1)
    h = jax.nn.relu(_conv(h, w2) + b2)
    shortcut = x if wp is None else _conv(x, wp) + bp
    return jax.nn.relu(_conv(h, w3) + b3 + shortcut)


def resnet50_stage(x, *weights):
    """ResNet-50's first stage (conv2_x): three bottleneck blocks, 64 -> 256 channels at 56x56."""
    first, rest = weights[:8], weights[8:]
    h = bottleneck(x, *first[:6], *first[6:])
    for k in range(0, len(rest), 6):
        h = bottleneck(h, *rest[k:k + 6])
    return h


def _stage_specs(batch=32, hw=56, cin=64, width=64, cout=256, blocks=3):
    t = bf16
    out = [spec((batch, hw, hw, cin), t)]
    for k in range(blocks):
        c = cin if k == 0 else cout
        out += [spec((1, 1, c, width), t), spec((width,), t), spec((3, 3, width, width), t), spec((width,), t),
                spec((1, 1, width, cout), t), spec((cout,), t)]
        if k == 0:
            out += [spec((1, 1, cin, cout), t), spec((cout,), t)]
    return tuple(out)


def gemm(a, b):
    return a @ b


N, HW, C1, C2 = 8, 32, 32, 64  # batch, height = width, input and block channels
RN, RHW, RC, DC = 8, 56, 64, 128  # ResNet's first stage: batch, height = width, channels; depthwise channels
# name -> (function, argument specs).
MODULES: dict[str, tuple] = {
    "layernorm_bf16": (FUSION.layer_norm, (spec((6, 512, 4096), bf16), spec((4096,), bf16),
                                           spec((4096,), bf16))),
    "conv_block": (conv_block, (spec((N, HW, HW, C1)), spec((3, 3, C1, C2)), spec((C2,)),
                                spec((3, 3, C2, C2)), spec((C2,)))),
    "resnet_block": (resnet_block, (spec((RN, RHW, RHW, RC)), spec((3, 3, RC, RC)), spec((RC,)),
                                    spec((3, 3, RC, RC)), spec((RC,)))),
    "depthwise_conv": (depthwise_conv, (spec((RN, RHW, RHW, DC)), spec((3, 3, 1, DC)), spec((DC,)))),
    "conv_wgrad": (conv_wgrad, (spec((RN, RHW, RHW, RC)), spec((3, 3, RC, RC)), spec((RN, RHW, RHW, RC)))),
    "resnet50_stage_bf16": (resnet50_stage, _stage_specs()),
    "gemm_bf16_2048": (gemm, (spec((2048, 2048), bf16), spec((2048, 2048), bf16))),
    "gemm_bf16_4096": (gemm, (spec((4096, 4096), bf16), spec((4096, 4096), bf16))),
}

CONV_MODULES = ("conv_block", "resnet_block", "depthwise_conv", "conv_wgrad", "resnet50_stage_bf16")


def lower(name: str) -> str:
    """The pre-optimization HLO text of one module, every layout the default (major to minor)."""
    fn, args = MODULES[name]
    text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
    text = FUSION._LAYOUT.sub(FUSION._default_layout, text)
    return text if text.endswith("\n") else text + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="only", default="", help="only modules whose name contains this")
    ap.add_argument("--xla-gpu-target", help="GpuTargetConfigProto text file: also write the convolution "
                    "modules as XLA:GPU optimizes them (NAME.xla_gpu.hlo, with its __cudnn$conv* calls)")
    opts = ap.parse_args(argv)
    for name in (n for n in MODULES if opts.only in n):
        path = HERE / f"{name}.hlo"
        path.write_text(lower(name))
        if opts.xla_gpu_target and name in CONV_MODULES:
            sys.path.insert(0, str(HERE.parent))
            from xla_gpu_compile import xla_gpu_text

            (HERE / f"{name}.xla_gpu.hlo").write_text(xla_gpu_text(path.read_text(), opts.xla_gpu_target))
        print(f"wrote {path.relative_to(HERE)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
