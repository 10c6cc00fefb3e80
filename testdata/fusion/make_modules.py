"""Regenerate the fusion bench's modules: `testdata/fusion/<name>.hlo`, and with `--xla` XLA:GPU's.

The input of `bench/fusion_vs_xla.py` (issue 9 item 7): small JAX programs covering what a fusion
pass decides on (elementwise chains, GELU, softmax, norms, every kind of reduction, transposes,
concatenates, pads and slices, in-place updates in loops, gather and scatter, MLP, attention, a
transformer layer forward and backward, while loops; and the three fusion gaps of issue 21:
max beside argmax, argsort, threefry dropout), lowered by jax to pre-optimization HLO
text with default layouts. Weights and inputs are entry parameters, so the files stay small and
hlo-run makes inputs from --seed. Sizes are modest (no tensor above 16M elements) so the
interpreter runs each in seconds.

    .venv/bin/python testdata/fusion/make_modules.py            # the pre-optimization modules
    .venv/bin/python testdata/fusion/make_modules.py --xla      # also XLA:GPU's optimized HLO
    .venv/bin/python testdata/fusion/make_modules.py --xla -k softmax   # only matching names

`--xla` runs `../shared/tools/xla_gpu_hlo.py` (under `--xla-python`, a Python with jax and the CUDA
PJRT plugin; no GPU needed) on each module twice and writes `xla/<name>.hlo` (XLA's default flags:
Triton for GEMMs and for softmax-like fusions on an H100) and `xla/<name>.notriton.hlo`
(`XLA_FLAGS=--xla_gpu_enable_triton_gemm=false --xla_disable_hlo_passes=triton-softmax-rewriter`:
cuBLAS for GEMMs and XLA's native emitters for softmax and norms), without metadata, so the bench
needs neither the plugin nor a GPU. The output is the same on every run with the same jax version (0.10.2).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax

HERE = Path(__file__).resolve().parent
TOOL = Path("/work/shared/tools/xla_gpu_hlo.py")
XLA_PYTHON = "/work/jaxgpu/bin/python"
# No Triton GEMMs and no Triton softmax/norm fusions (there is no flag for the latter in jaxlib
# 0.10.2, so its pass is disabled by name): the decisions of XLA's own emitters.
NOTRITON_FLAGS = "--xla_gpu_enable_triton_gemm=false --xla_disable_hlo_passes=triton-softmax-rewriter"

f32, bf16, s32 = jnp.float32, jnp.bfloat16, jnp.int32


def spec(shape, dtype=f32):
    return jax.ShapeDtypeStruct(shape, dtype)


# -- building blocks ------------------------------------------------------------------------------
def gelu(x):
    return jax.nn.gelu(x, approximate=True)


def layer_norm(x, scale, bias, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * scale + bias


def rms_norm(x, scale, eps=1e-6):
    xf = x.astype(f32)
    ms = jnp.mean(jnp.square(xf), axis=-1, keepdims=True)
    return (xf * lax.rsqrt(ms + eps)).astype(x.dtype) * scale


B, S, D, H, F = 2, 256, 512, 8, 2048  # transformer shapes: batch, sequence, model, heads, MLP
DH = D // H


def attention(x, w_qkv, w_out, causal=False):
    b, s, _ = x.shape
    q, k, v = jnp.split(x @ w_qkv, 3, axis=-1)

    def heads(t):
        return t.reshape(b, s, H, DH).transpose(0, 2, 1, 3)

    q, k, v = heads(q), heads(k), heads(v)
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.asarray(DH, x.dtype))
    if causal:
        mask = jnp.tril(jnp.ones((s, s), bool))
        scores = jnp.where(mask, scores, jnp.asarray(-1e9, scores.dtype))
    probs = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("bhqk,bhkd->bhqd", probs, v).transpose(0, 2, 1, 3).reshape(b, s, D)
    return ctx @ w_out


def mlp(x, w1, b1, w2, b2):
    return gelu(x @ w1 + b1) @ w2 + b2


def transformer_layer(x, ln1_s, ln1_b, w_qkv, w_out, ln2_s, ln2_b, w1, b1, w2, b2):
    x = x + attention(layer_norm(x, ln1_s, ln1_b), w_qkv, w_out, causal=True)
    return x + mlp(layer_norm(x, ln2_s, ln2_b), w1, b1, w2, b2)


LAYER_ARGS = (spec((B, S, D)), spec((D,)), spec((D,)), spec((D, 3 * D)), spec((D, D)),
              spec((D,)), spec((D,)), spec((D, F)), spec((F,)), spec((F, D)), spec((D,)))


def transformer_layer_loss(params, x):
    return jnp.mean(jnp.square(transformer_layer(x, *params)))


# -- the modules ----------------------------------------------------------------------------------
def _elementwise_chain(x, y):
    return jnp.tanh(jnp.exp(x) * y + 1.0) - jnp.sqrt(jnp.abs(y)) * 0.5


def _elementwise_broadcast(x, bias, scale):
    z = (x + bias[None, :]) * scale[:, None]
    return jnp.where(z > 0, z, 0.01 * z).astype(bf16)


def _softmax(x):
    return jax.nn.softmax(x, axis=-1)


def _log_softmax(x):
    return jax.nn.log_softmax(x, axis=-1)


def _reduce_sum_max(x):
    return jnp.sum(x, axis=-1), jnp.max(x, axis=-1)


def _dus_loop(buf, rows):
    def body(i, b):
        upd = jnp.tanh(lax.dynamic_slice_in_dim(rows, i * 16, 16, axis=0)) * 2.0
        return lax.dynamic_update_slice(b, upd, (i * 16, 0))
    return lax.fori_loop(0, 64, body, buf)


def _scan_rnn(h0, xs, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h
    return lax.scan(step, h0, xs)


def _while_loop(x):
    def cond(c):
        i, v = c
        return jnp.logical_and(i < 100, jnp.max(jnp.abs(v)) < 1e6)

    def body(c):
        i, v = c
        return i + 1, v * 1.01 + jnp.sin(v)
    return lax.while_loop(cond, body, (jnp.int32(0), x))[1]


def _conditional(p, x):
    return lax.cond(p > 0, lambda v: jnp.exp(v) * 2.0, lambda v: jnp.log1p(jnp.abs(v)), x)


def _gather(table, idx):
    return jnp.take(table, idx, axis=0, mode="clip") * 2.0


def _scatter_add(x, idx, upd):
    return x.at[idx].add(upd * 0.5, mode="drop")


def _pad_slice(x):
    p = jnp.pad(x, ((1, 1), (2, 2)))
    return p[2:, 4:] + p[:-2, :-4] + jnp.abs(x[:, ::-1])


def _concat(a, b, c):
    return jnp.concatenate([jnp.exp(a), b * 2.0, c], axis=1) + 1.0


def _layernorm_grad(x, s, b):
    return jax.grad(lambda x_, s_, b_: jnp.sum(layer_norm(x_, s_, b_) ** 2), argnums=(0, 1, 2))(x, s, b)


def _cumsum(x):
    return jnp.cumsum(x, axis=-1)


def _sort(x):
    return jnp.sort(x, axis=-1)


def _argmax_max(x):
    return jnp.max(x, axis=-1), jnp.argmax(x, axis=-1)


def _dropout(key, x):
    """A training step's dropout: split the threefry key, keep 90% with the subkey, return the
    new key (two threefry loops, each rotating its key words every round)."""
    key, sub = jax.random.split(jax.random.wrap_key_data(key, impl="threefry2x32"))
    keep = jax.random.bernoulli(sub, 0.9, x.shape)
    return jax.random.key_data(key), jnp.where(keep, x / 0.9, 0.0)


def _transformer_bwd(params, x):
    return jax.grad(transformer_layer_loss)(params, x)


# name -> (function, argument specs). Names are file names; keep them sorted by theme.
MODULES: dict[str, tuple] = {
    "elementwise_chain": (_elementwise_chain, (spec((4096, 1024)), spec((4096, 1024)))),
    "elementwise_broadcast": (_elementwise_broadcast, (spec((4096, 1024)), spec((1024,)), spec((4096,)))),
    "gelu_f32": (gelu, (spec((8192, 1024)),)),
    "gelu_bf16": (gelu, (spec((8192, 1024), bf16),)),
    "softmax_f32": (_softmax, (spec((4096, 1024)),)),
    "softmax_bf16": (_softmax, (spec((4096, 1024), bf16),)),
    "log_softmax": (_log_softmax, (spec((4096, 1024)),)),
    "layernorm_f32": (layer_norm, (spec((4096, 1024)), spec((1024,)), spec((1024,)))),
    "layernorm_grad": (_layernorm_grad, (spec((4096, 1024)), spec((1024,)), spec((1024,)))),
    "rmsnorm_f32": (rms_norm, (spec((4096, 1024)), spec((1024,)))),
    "rmsnorm_bf16": (rms_norm, (spec((4096, 1024), bf16), spec((1024,), bf16))),
    "reduce_row": (lambda x: jnp.sum(x, axis=-1), (spec((4096, 1024)),)),
    "reduce_row_bf16": (lambda x: jnp.sum(x.astype(f32) * x.astype(f32), axis=-1),
                        (spec((4096, 1024), bf16),)),
    "reduce_column": (lambda x: jnp.sum(x, axis=0), (spec((4096, 1024)),)),
    "reduce_multi_row": (lambda x: jnp.max(x, axis=-1), (spec((262144, 8)),)),
    "reduce_full": (lambda x: jnp.sum(jnp.square(x)), (spec((2048, 2048)),)),
    "reduce_batch": (lambda x: jnp.sum(x, axis=1), (spec((64, 512, 128)),)),
    "reduce_two_dims": (lambda x: jnp.mean(x, axis=(0, 2)), (spec((64, 512, 128)),)),
    "reduce_argmax": (lambda x: jnp.argmax(x, axis=-1), (spec((4096, 1024)),)),
    "reduce_sum_max": (_reduce_sum_max, (spec((4096, 1024)),)),
    "reduce_argmax_max": (_argmax_max, (spec((4096, 1024)),)),
    "reduce_cumsum": (_cumsum, (spec((1024, 1024)),)),
    "transpose_2d": (lambda x: x.T * 2.0, (spec((4096, 2048)),)),
    "transpose_3d_021": (lambda x: jnp.exp(x).transpose(0, 2, 1), (spec((64, 512, 256)),)),
    "transpose_3d_210": (lambda x: x.transpose(2, 1, 0) + 1.0, (spec((64, 256, 512)),)),
    "transpose_add": (lambda x, y: x + y.T, (spec((2048, 2048)), spec((2048, 2048)))),
    "concatenate": (_concat, (spec((2048, 256)), spec((2048, 512)), spec((2048, 256)))),
    "pad_slice": (_pad_slice, (spec((2048, 1024)),)),
    "dus_loop": (_dus_loop, (spec((1024, 1024)), spec((1024, 1024)))),
    "gather": (_gather, (spec((32768, 256)), spec((8192,), s32))),
    "scatter_add": (_scatter_add, (spec((32768, 256)), spec((8192,), s32), spec((8192, 256)))),
    "sort": (_sort, (spec((1024, 1024)),)),
    "sort_argsort": (lambda x: jnp.argsort(x, axis=-1), (spec((1024, 1024)),)),
    "dropout": (_dropout, (spec((2,), jnp.uint32), spec((4096, 1024)))),
    "while_loop": (_while_loop, (spec((1024, 1024)),)),
    "conditional": (_conditional, (spec((), f32), spec((2048, 1024)))),
    "scan_rnn": (_scan_rnn, (spec((64, 512)), spec((32, 64, 512)), spec((512, 512)))),
    "matmul_bias_relu": (lambda x, w, b: jax.nn.relu(x @ w + b), (spec((2048, 1024)), spec((1024, 1024)),
                                                                  spec((1024,)))),
    "mlp_f32": (mlp, (spec((2048, 512)), spec((512, 2048)), spec((2048,)), spec((2048, 512)), spec((512,)))),
    "mlp_bf16": (mlp, (spec((2048, 512), bf16), spec((512, 2048), bf16), spec((2048,), bf16),
                       spec((2048, 512), bf16), spec((512,), bf16))),
    "attention": (lambda x, wq, wo: attention(x, wq, wo, causal=True), (spec((B, S, D)), spec((D, 3 * D)),
                                                                        spec((D, D)))),
    "transformer_fwd": (transformer_layer, LAYER_ARGS),
    "transformer_bwd": (_transformer_bwd, (LAYER_ARGS[1:], LAYER_ARGS[0])),
}


_LAYOUT = re.compile(r"\b([a-z][a-z0-9]*\[([0-9,]*)\])\{[0-9,]*\}")


def _default_layout(match: re.Match) -> str:
    rank = len(match.group(2).split(",")) if match.group(2) else 0
    return match.group(1) + "{" + ",".join(str(d) for d in range(rank - 1, -1, -1)) + "}"


def lower(name: str) -> str:
    """The pre-optimization HLO text of one module, every layout the default (major to minor).

    jax's HLO text carries layout hints (a transpose's result as `{0,1}`, and the entry result
    layout taken from the root), but jax compiles with default layouts and XLA:GPU here sees the
    module through StableHLO, which has none; so both compilers start from the same layouts."""
    fn, args = MODULES[name]
    text = _LAYOUT.sub(_default_layout, jax.jit(fn).lower(*args).as_text(dialect="hlo"))
    return text if text.endswith("\n") else text + "\n"


def xla_optimized(path: Path, out: Path, python: str, flags: str | None) -> None:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    if flags:
        env["XLA_FLAGS"] = flags
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    proc = subprocess.run([python, str(TOOL), str(path), "-o", str(out)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise SystemExit(f"{path}: XLA:GPU compile failed: {tail[0]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--xla", action="store_true", help="also write XLA:GPU's optimized HLO under xla/")
    ap.add_argument("--xla-python", default=XLA_PYTHON, help="a Python with jax and the CUDA plugin")
    ap.add_argument("-k", dest="only", default="", help="only modules whose name contains this")
    ap.add_argument("--list", action="store_true", help="print the module names and exit")
    opts = ap.parse_args(argv)
    names = [n for n in MODULES if opts.only in n]
    if opts.list:
        print("\n".join(names))
        return 0
    for name in names:
        path = HERE / f"{name}.hlo"
        path.write_text(lower(name))
        print(f"wrote {path.relative_to(HERE)}", flush=True)
        if opts.xla:
            (HERE / "xla").mkdir(exist_ok=True)
            xla_optimized(path, HERE / "xla" / f"{name}.hlo", opts.xla_python, None)
            xla_optimized(path, HERE / "xla" / f"{name}.notriton.hlo", opts.xla_python, NOTRITON_FLAGS)
            print(f"wrote xla/{name}.hlo, xla/{name}.notriton.hlo", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
