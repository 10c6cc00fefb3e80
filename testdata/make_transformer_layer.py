"""Regenerate `transformer_layer.hlo`: one pre-LayerNorm transformer layer's forward pass.

Multi-head self-attention (softmax over the keys), LayerNorm, and an MLP with the tanh form of
GELU, in f32, lowered by jax to pre-optimization HLO text (jnp helpers show up as `call`s):

    .venv/bin/python testdata/make_transformer_layer.py > testdata/transformer_layer.hlo

Shapes: batch 2, sequence 256, d_model 512, 8 heads of 64, MLP width 2048. The weights are
entry parameters (not constants), so the file stays small and hlo-run makes them from --seed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

BATCH, SEQ, D_MODEL, HEADS, D_FF = 2, 256, 512, 8, 2048
D_HEAD = D_MODEL // HEADS


def layer_norm(x, scale, bias, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def attention(x, w_qkv, w_out):
    qkv = x @ w_qkv  # [B, S, 3D]
    q, k, v = jnp.split(qkv, 3, axis=-1)

    def heads(t):
        return t.reshape(BATCH, SEQ, HEADS, D_HEAD).transpose(0, 2, 1, 3)

    q, k, v = heads(q), heads(k), heads(v)
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(D_HEAD))
    probs = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("bhqk,bhkd->bhqd", probs, v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, D_MODEL)
    return ctx @ w_out


def mlp(x, w1, b1, w2, b2):
    return jax.nn.gelu(x @ w1 + b1, approximate=True) @ w2 + b2


def transformer_layer(x, ln1_scale, ln1_bias, w_qkv, w_out, ln2_scale, ln2_bias, w1, b1, w2, b2):
    x = x + attention(layer_norm(x, ln1_scale, ln1_bias), w_qkv, w_out)
    return x + mlp(layer_norm(x, ln2_scale, ln2_bias), w1, b1, w2, b2)


def main() -> None:
    f32 = jnp.float32
    spec = jax.ShapeDtypeStruct
    args = (
        spec((BATCH, SEQ, D_MODEL), f32),
        spec((D_MODEL,), f32), spec((D_MODEL,), f32),
        spec((D_MODEL, 3 * D_MODEL), f32), spec((D_MODEL, D_MODEL), f32),
        spec((D_MODEL,), f32), spec((D_MODEL,), f32),
        spec((D_MODEL, D_FF), f32), spec((D_FF,), f32),
        spec((D_FF, D_MODEL), f32), spec((D_MODEL,), f32),
    )
    print(jax.jit(transformer_layer).lower(*args).as_text(dialect="hlo"), end="")


if __name__ == "__main__":
    main()
