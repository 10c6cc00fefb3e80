"""Makes the GEMM fusion test modules: JAX functions with dots (matmuls in f32, bf16, f16,
int8 x bf16, f8, a bias+GELU epilogue, batched, transposed operands, an attention block, small and
skinny dots, a dot inside a transformer MLP), each as jax lowers it (`NAME.hlo`) and as XLA:GPU
optimizes it for an H100 (`NAME.xla_gpu.hlo`, with XLA's `__triton_nested_gemm_fusion` fusions
and `__cublas$gemm` calls).

    python testdata/triton/make_modules.py --xla-gpu-target H100.txtpb   # write both forms
    python testdata/triton/make_modules.py --check                      # the .hlo files are current

The XLA:GPU form is testdata/xla_gpu_compile.py's deviceless compile (jax's CUDA plugin and a
GpuTargetConfigProto text file; no GPU). testdata/triton/compare_decisions.py compares hlo-opt's
GEMM fusion decisions with it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _attention(jax, jnp):
    def attn(q, k, v):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / 8.0
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)

    return attn


def _mlp(jax, jnp):
    def mlp(x, w1, b1, w2):
        return jax.nn.gelu(x @ w1 + b1) @ w2

    return mlp


def _cases():
    import jax
    import jax.numpy as jnp

    f32, bf16, f16, s8 = jnp.float32, jnp.bfloat16, jnp.float16, jnp.int8
    z = jnp.zeros
    return {
        "matmul_f32": (lambda a, b: a @ b, (z((256, 512), f32), z((512, 128), f32))),
        "matmul_bf16": (lambda a, b: a @ b, (z((512, 1024), bf16), z((1024, 256), bf16))),
        "matmul_f16": (lambda a, b: a @ b, (z((128, 256), f16), z((256, 384), f16))),
        "matmul_bf16_f32acc": (lambda a, b: jnp.matmul(a, b, preferred_element_type=f32),
                               (z((256, 512), bf16), z((512, 256), bf16))),
        "int8_bf16": (lambda a, w: a @ w.astype(bf16), (z((256, 1024), bf16), z((1024, 512), s8))),
        "f8_bf16": (lambda a, w: a @ w.astype(bf16),
                    (z((128, 256), bf16), z((256, 128), jnp.float8_e4m3fn))),
        "bias_gelu_bf16": (lambda a, b, c: jax.nn.gelu(a @ b + c),
                           (z((512, 768), bf16), z((768, 1024), bf16), z((1024,), bf16))),
        "bias_relu_f32": (lambda a, b, c: jax.nn.relu(a @ b + c),
                          (z((256, 512), f32), z((512, 256), f32), z((256,), f32))),
        "batched_bf16": (lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b),
                         (z((8, 128, 256), bf16), z((8, 256, 128), bf16))),
        "transposed_lhs_bf16": (lambda a, b: a.T @ b, (z((512, 256), bf16), z((512, 384), bf16))),
        "transposed_rhs_bf16": (lambda a, b: a @ b.T, (z((256, 512), bf16), z((384, 512), bf16))),
        "attention_bf16": (_attention(jax, jnp), (z((4, 128, 64), bf16), z((4, 128, 64), bf16),
                                                  z((4, 128, 64), bf16))),
        "mlp_bf16": (_mlp(jax, jnp), (z((256, 512), bf16), z((512, 2048), bf16), z((2048,), bf16),
                                      z((2048, 512), bf16))),
        "small_f32": (lambda a, b: a @ b, (z((8, 16), f32), z((16, 8), f32))),
        "small_bf16": (lambda a, b: a @ b, (z((16, 32), bf16), z((32, 16), bf16))),
        "matvec_bf16": (lambda a, b: a @ b, (z((1024, 1024), bf16), z((1024,), bf16))),
        "skinny_bf16": (lambda a, b: a @ b, (z((4, 4096), bf16), z((4096, 4096), bf16))),
        "sliced_bf16": (lambda a, b: a[:, :256] @ b, (z((128, 512), bf16), z((256, 128), bf16))),
        "broadcast_lhs_bf16": (lambda a, b: jnp.broadcast_to(a, (128, 256)) @ b,
                               (z((256,), bf16), z((256, 64), bf16))),
        "reshape_lhs_bf16": (lambda a, b: a.reshape(256, 512) @ b,
                             (z((16, 16, 512), bf16), z((512, 128), bf16))),
        "matmul_f32_large": (lambda a, b: a @ b, (z((1024, 1024), f32), z((1024, 1024), f32))),
        "matmul_bf16_out_f32": (lambda a, b: (a @ b).astype(f32),
                                (z((256, 256), bf16), z((256, 256), bf16))),
        "matmul_s8": (lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.int32),
                      (z((256, 256), s8), z((256, 256), s8))),
        "matmul_f64": (lambda a, b: a @ b, (z((64, 64), jnp.float64), z((64, 64), jnp.float64))),
    }


def _hlo_text(fn, args) -> str:
    import jax

    return jax.jit(fn).lower(*args).compiler_ir("hlo").as_hlo_text()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when a checked-in .hlo differs")
    ap.add_argument("--xla-gpu-target", help="GpuTargetConfigProto text file: also write NAME.xla_gpu.hlo")
    ap.add_argument("names", nargs="*", help="only these cases")
    opts = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_enable_x64", True)
    stale = []
    for name, (fn, args) in _cases().items():
        if opts.names and name not in opts.names:
            continue
        text = _hlo_text(fn, args)
        path = HERE / f"{name}.hlo"
        if opts.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
            continue
        path.write_text(text)
        if opts.xla_gpu_target:
            sys.path.insert(0, str(HERE.parent))
            from xla_gpu_compile import xla_gpu_text

            (HERE / f"{name}.xla_gpu.hlo").write_text(xla_gpu_text(text, opts.xla_gpu_target))
    if stale:
        print("stale: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
