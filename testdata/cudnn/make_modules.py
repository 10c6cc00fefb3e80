"""Makes the cuDNN convolution test modules: JAX convolutions (forward, strided, dilated, grouped,
depthwise, other layouts and ranks, 16-bit types, fused bias and activations, backward input and
filter), each as jax lowers it (`NAME.hlo`) and as XLA:GPU optimizes it for an H100
(`NAME.xla_gpu.hlo`, with XLA's `__cudnn$conv*` custom calls).

    python testdata/cudnn/make_modules.py --xla-gpu-target H100.txtpb   # write both forms
    python testdata/cudnn/make_modules.py --check                      # the .hlo files are current

The XLA:GPU form is testdata/xla_gpu_compile.py's deviceless compile (jax's CUDA plugin and a
GpuTargetConfigProto text file; no GPU). The
tests (tests/unit/interpreter/test_cudnn_conv.py) run the XLA:GPU form on the interpreter and the
jax form on XLA:CPU with the same inputs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NHWC = ("NHWC", "HWIO", "NHWC")
NCHW = ("NCHW", "OIHW", "NCHW")


def _cases():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def conv(x, w, strides=(1, 1), padding="SAME", dn=NHWC, **kw):
        return lax.conv_general_dilated(x, w, strides, padding, dimension_numbers=dn, **kw)

    def grads(f, *args, argnums=(0, 1)):
        return jax.grad(lambda *a: jnp.sum(f(*a).astype(jnp.float32) ** 2), argnums=argnums)(*args)

    f32, f16, bf16 = jnp.float32, jnp.float16, jnp.bfloat16
    x, w, b = jnp.zeros((4, 16, 16, 8), f32), jnp.zeros((3, 3, 8, 16), f32), jnp.zeros((16,), f32)
    xd, wd = jnp.zeros((2, 12, 12, 8), f32), jnp.zeros((3, 3, 1, 8), f32)
    wg = jnp.zeros((3, 3, 4, 16), f32)
    xc, wc = jnp.zeros((2, 8, 10, 10), f32), jnp.zeros((16, 8, 3, 3), f32)
    x1, w1 = jnp.zeros((2, 32, 4), f32), jnp.zeros((5, 4, 8), f32)
    x3, w3 = jnp.zeros((1, 6, 6, 6, 4), f32), jnp.zeros((3, 3, 3, 4, 8), f32)
    d1, d3 = ("NWC", "WIO", "NWC"), ("NDHWC", "DHWIO", "NDHWC")
    return {
        "forward": (lambda x, w: conv(x, w), (x, w)),
        "forward_bias_relu": (lambda x, w, b: jax.nn.relu(conv(x, w) + b), (x, w, b)),
        "forward_bias_relu6": (lambda x, w, b: jnp.clip(conv(x, w) + b, 0, 6), (x, w, b)),
        "forward_strided_valid": (lambda x, w: conv(x, w, (2, 2), "VALID"), (x, w)),
        "forward_asymmetric_pad": (lambda x, w: conv(x, w, (2, 1), ((0, 2), (1, 0))), (x, w)),
        "forward_dilated": (lambda x, w: conv(x, w, rhs_dilation=(2, 2)), (x, w)),
        "forward_depthwise": (lambda x, w: conv(x, w, feature_group_count=8), (xd, wd)),
        "forward_grouped": (lambda x, w: conv(x, w, feature_group_count=2), (x, wg)),
        "forward_nchw": (lambda x, w: conv(x, w, dn=NCHW), (xc, wc)),
        "forward_1d": (lambda x, w: conv(x, w, (2,), "SAME", dn=d1), (x1, w1)),
        "forward_3d": (lambda x, w: conv(x, w, (1, 1, 1), "SAME", dn=d3), (x3, w3)),
        "forward_f16_bias_relu": (lambda x, w, b: jax.nn.relu(conv(x, w) + b),
                                  (x.astype(f16), w.astype(f16), b.astype(f16))),
        "forward_bf16": (lambda x, w: conv(x, w), (x.astype(bf16), w.astype(bf16))),
        "forward_side_input_relu": (lambda x, w, b, s: jax.nn.relu(conv(x, w) + b + s),
                                    (x, w, b, jnp.zeros((4, 16, 16, 16), f32))),
        "grad_strided": (lambda x, w: grads(lambda x, w: conv(x, w, (2, 2)), x, w), (x, w)),
        "grad_dilated_valid": (lambda x, w: grads(
            lambda x, w: conv(x, w, (1, 1), "VALID", rhs_dilation=(2, 2)), x, w), (x, w)),
        "grad_depthwise": (lambda x, w: grads(
            lambda x, w: conv(x, w, feature_group_count=8), x, w), (xd, wd)),
        "grad_grouped": (lambda x, w: grads(lambda x, w: conv(x, w, feature_group_count=2), x, w), (x, wg)),
        "grad_nchw": (lambda x, w: grads(lambda x, w: conv(x, w, (2, 2), dn=NCHW), x, w), (xc, wc)),
        "grad_1d": (lambda x, w: grads(lambda x, w: conv(x, w, (2,), "SAME", dn=d1), x, w), (x1, w1)),
        "grad_bf16": (lambda x, w: grads(lambda x, w: conv(x, w), x, w), (x.astype(bf16), w.astype(bf16))),
        "resnet_block_grad": (_resnet_block_grad(jax, jnp, conv),
                              (x, w, jnp.zeros((3, 3, 16, 8), f32), b)),
        **_padding_and_int8_cases(jax, jnp, conv),
    }


def _padding_and_int8_cases(jax, jnp, conv):
    """cudnn_pad_for_convolutions (f16 features to 8, 3 -> 4; bf16 left alone) and the int8 forms
    of cudnn-fused-convolution-rewriter (s8 -> s8 with clamp, s8 -> f32, bias, side input, int8
    features padded to 4 or 32); int8_s32 is a convolution XLA:GPU refuses (s32 result)."""
    f32, f16, bf16, s8, s32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int8, jnp.int32
    z = jnp.zeros

    def s8_out(v):
        return jnp.clip(v, -128, 127).astype(s8)

    x8, w8, b64 = z((4, 16, 16, 32), s8), z((3, 3, 32, 64), s8), z((64,), f32)
    return {
        "pad_f16_c3_32": (lambda x, w: conv(x, w), (z((4, 16, 16, 3), f16), z((3, 3, 3, 32), f16))),
        "pad_f16_c7_grad": (lambda x, w: jax.grad(lambda x, w: jnp.sum(conv(x, w).astype(f32) ** 2),
                                                  argnums=(0, 1))(x, w),
                            (z((4, 16, 16, 7), f16), z((3, 3, 7, 14), f16))),
        "pad_f16_c6_12_declined": (lambda x, w: conv(x, w), (z((4, 16, 16, 6), f16), z((3, 3, 6, 12), f16))),
        "pad_bf16_c6_12": (lambda x, w: conv(x, w), (z((4, 16, 16, 6), bf16), z((3, 3, 6, 12), bf16))),
        "int8_s8_clamp": (lambda x, w: s8_out(conv(x, w, preferred_element_type=s32)), (x8, w8)),
        "int8_f32": (lambda x, w: conv(x, w, preferred_element_type=f32), (x8, w8)),
        "int8_bias_relu_s8": (lambda x, w, b: s8_out(jax.nn.relu(conv(x, w, preferred_element_type=f32) + b)),
                              (x8, w8, b64)),
        "int8_c6_s8": (lambda x, w: s8_out(conv(x, w, preferred_element_type=f32)),
                       (z((4, 16, 16, 6), s8), z((3, 3, 6, 12), s8))),
        "int8_c24_side_s8": (lambda x, w, b, s: s8_out(
            jax.nn.relu(conv(x, w, preferred_element_type=f32) + b + s.astype(f32))),
            (z((4, 16, 16, 24), s8), z((3, 3, 24, 24), s8), z((24,), f32), z((4, 16, 16, 24), s8))),
        "int8_s32": (lambda x, w: conv(x, w, preferred_element_type=s32), (x8, w8)),
    }


def _resnet_block_grad(jax, jnp, conv):
    def block(x, w1, w2, b):
        h = jax.nn.relu(conv(x, w1) + b)
        return jax.nn.relu(conv(h, w2) + x)

    def loss(x, w1, w2, b):
        return jnp.sum(block(x, w1, w2, b) ** 2)

    return lambda x, w1, w2, b: (block(x, w1, w2, b), jax.grad(loss, argnums=(0, 1, 2, 3))(x, w1, w2, b))


def _write_xla_gpu(name: str, text: str, target: str) -> None:
    """NAME.xla_gpu.hlo, or NAME.xla_gpu.error with the first line of XLA's refusal."""
    from xla_gpu_compile import xla_gpu_text

    try:
        (HERE / f"{name}.xla_gpu.hlo").write_text(xla_gpu_text(text, target))
    except Exception as exc:  # noqa: BLE001 - XLA:GPU refuses the module: that is the expectation
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        (HERE / f"{name}.xla_gpu.error").write_text(" ".join(lines[:2]) + "\n")


def _hlo_text(fn, args) -> str:
    import jax

    return jax.jit(fn).lower(*args).compiler_ir("hlo").as_hlo_text()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when a checked-in .hlo differs")
    ap.add_argument("--xla-gpu-target", help="GpuTargetConfigProto text file: also write NAME.xla_gpu.hlo")
    opts = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    stale = []
    for name, (fn, args) in _cases().items():
        text = _hlo_text(fn, args)
        path = HERE / f"{name}.hlo"
        if opts.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
            continue
        path.write_text(text)
        if opts.xla_gpu_target:
            sys.path.insert(0, str(HERE.parent))
            _write_xla_gpu(name, text, opts.xla_gpu_target)
    if stale:
        print("stale: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
