"""The real-library tier's flax models (linen and nnx); conventions in `models_common.py`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from models_common import KEY, bf16, f16, mse, s32, spec


# -- flax linen ---------------------------------------------------------------------------------------
def linen_cnn_bn_grad():
    """Conv / BatchNorm (training: batch statistics) / relu / max pool twice, global mean pool,
    Dense; softmax cross-entropy (optax) on integer labels; the loss, the accuracy (argmax), the
    gradients (max pool's backward is a select-and-scatter) and the updated running statistics."""
    import flax.linen as nn
    import optax

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            for features in (16, 32):
                x = nn.Conv(features, (3, 3))(x)
                x = nn.max_pool(nn.relu(nn.BatchNorm(use_running_average=False)(x)), (2, 2), (2, 2))
            return nn.Dense(10)(jnp.mean(x, axis=(1, 2)))

    model, x, labels = CNN(), spec((4, 16, 16, 3)), spec((4,), s32)
    variables = jax.eval_shape(model.init, KEY, x)

    def step(params, batch_stats, x, labels):
        def loss_fn(p):
            logits, new = model.apply({"params": p, "batch_stats": batch_stats}, x, mutable=["batch_stats"])
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
            return loss, (new["batch_stats"], jnp.mean(jnp.argmax(logits, -1) == labels % 10))
        (loss, (stats, accuracy)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        return loss, accuracy, grads, stats
    return step, (variables["params"], variables["batch_stats"], x, labels)


def linen_resnet_bf16():
    """A residual stack in bf16 compute with f32 parameters (flax's mixed precision: `dtype=bf16`):
    a stem conv, three blocks of conv-BatchNorm-relu-conv-BatchNorm plus the skip, a Dense head."""
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            conv = lambda: nn.Conv(x.shape[-1], (3, 3), use_bias=False, dtype=bf16)  # noqa: E731
            norm = lambda: nn.BatchNorm(use_running_average=False, dtype=bf16)  # noqa: E731
            y = norm()(conv()(nn.relu(norm()(conv()(x)))))
            return nn.relu(x + y)

    class ResNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(16, (3, 3), dtype=bf16)(x)
            for _ in range(3):
                x = Block()(x)
            return nn.Dense(10, dtype=bf16)(jnp.mean(x, axis=(1, 2)))

    model, x = ResNet(), spec((2, 8, 8, 3), bf16)
    variables = jax.eval_shape(model.init, KEY, x)

    def forward(params, batch_stats, x):
        return model.apply({"params": params, "batch_stats": batch_stats}, x, mutable=["batch_stats"])
    return forward, (variables["params"], variables["batch_stats"], x)


def linen_lstm_grad():
    """`nn.RNN(nn.LSTMCell)` (a `lax.scan` over time) and a Dense readout of the last step; the
    gradient of a squared error."""
    import flax.linen as nn

    class Seq(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(4)(nn.RNN(nn.LSTMCell(32))(x)[:, -1])

    model, x, y = Seq(), spec((4, 12, 8)), spec((4, 4))
    params = jax.eval_shape(model.init, KEY, x)["params"]
    return jax.value_and_grad(lambda p, x, y: mse(model.apply({"params": p}, x), y)), (params, x, y)


def linen_embed_xent_grad():
    """A tiny language model: nn.Embed of token ids, a gelu MLP, logits over the vocabulary with the
    embedding reused as the output projection (`attend`), next-token cross-entropy; its gradient."""
    import flax.linen as nn
    import optax

    class LM(nn.Module):
        @nn.compact
        def __call__(self, tokens):
            embed = nn.Embed(256, 64)
            h = embed(tokens)
            h = h + nn.Dense(64)(nn.gelu(nn.Dense(128)(nn.LayerNorm()(h))))
            return embed.attend(h)

    model, tokens = LM(), spec((4, 32), s32)
    params = jax.eval_shape(model.init, KEY, tokens)["params"]

    def loss(p, tokens):
        logits = model.apply({"params": p}, tokens)[:, :-1]
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()
    return jax.value_and_grad(loss), (params, tokens)


def linen_attention_bf16_grad():
    """`nn.MultiHeadDotProductAttention` (causal self-attention) after `nn.LayerNorm`, bf16 compute
    with f32 parameters; gradients of a squared error: the attention backward in bf16."""
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            mask = nn.make_causal_mask(x[..., 0])
            return x + nn.MultiHeadDotProductAttention(4, dtype=bf16)(nn.LayerNorm(dtype=bf16)(x), mask=mask)

    model, x, y = Block(), spec((2, 32, 64), bf16), spec((2, 32, 64), bf16)
    params = jax.eval_shape(model.init, KEY, x)["params"]
    return jax.grad(lambda p, x, y: mse(model.apply({"params": p}, x), y)), (params, x, y)


def linen_cnn_bf16_grad():
    """A bf16 CNN: conv, `nn.GroupNorm`, relu, `nn.avg_pool`, a strided VALID conv, Dense;
    cross-entropy on integer labels; the gradient (convolutions backward in bf16)."""
    import flax.linen as nn
    import optax

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.GroupNorm(4, dtype=bf16)(nn.Conv(16, (3, 3), dtype=bf16)(x)))
            x = nn.avg_pool(x, (2, 2), (2, 2))
            x = nn.relu(nn.Conv(16, (3, 3), strides=2, padding="VALID", dtype=bf16)(x))
            return nn.Dense(10, dtype=bf16)(x.reshape(x.shape[0], -1))

    model, x, labels = CNN(), spec((4, 12, 12, 3), bf16), spec((4,), s32)
    params = jax.eval_shape(model.init, KEY, x)["params"]

    def loss(p, x, labels):
        logits = model.apply({"params": p}, x).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    return jax.grad(loss), (params, x, labels)


def linen_mlp_f16_loss_scale():
    """Mixed precision with f16 as jmp-style dynamic loss scaling does it: Dense layers computing
    in f16 with f32 parameters, the loss scaled up before the gradient and the gradients scaled
    down after it, an SGD step applied only when every gradient is finite (else the scale halves)."""
    import flax.linen as nn
    import optax

    model = nn.Sequential([nn.Dense(64, dtype=f16), nn.relu, nn.Dense(64, dtype=f16), nn.relu,
                           nn.Dense(10, dtype=f16)])
    x, y = spec((32, 48), f16), spec((32, 10))
    params = jax.eval_shape(model.init, KEY, x)
    tx = optax.sgd(0.05)

    def step(params, scale, x, y):
        grads = jax.grad(lambda p: mse(model.apply(p, x), y) * scale)(params)
        grads = jax.tree.map(lambda g: g / scale, grads)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
        updates, _ = tx.update(grads, tx.init(params))
        new = jax.tree.map(lambda n, o: jnp.where(finite, n, o), optax.apply_updates(params, updates), params)
        return new, jnp.where(finite, scale, scale / 2), finite
    return step, (params, spec(()), x, y)


# -- flax nnx -----------------------------------------------------------------------------------------
def _nnx_block(d=64, heads=4, dtype=None):
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.ln1, self.ln2 = nnx.LayerNorm(d, rngs=rngs), nnx.LayerNorm(d, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(heads, d, decode=False, dtype=dtype, rngs=rngs)
            self.fc1 = nnx.Linear(d, 4 * d, dtype=dtype, rngs=rngs)
            self.fc2 = nnx.Linear(4 * d, d, dtype=dtype, rngs=rngs)

        def __call__(self, x):
            mask = nnx.make_causal_mask(x[..., 0])
            x = x + self.attn(self.ln1(x), mask=mask)
            return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))
    return nnx.split(nnx.eval_shape(lambda: Block(nnx.Rngs(0))))


def nnx_transformer_fwd():
    """A pre-LayerNorm transformer block of nnx layers (causal nnx.MultiHeadAttention, gelu MLP)."""
    from flax import nnx

    graph, state = _nnx_block()
    return (lambda state, x: nnx.merge(graph, state)(x)), (state, spec((2, 32, 64)))


def nnx_transformer_grad():
    """The block above, backward: gradients of a squared error with respect to every parameter."""
    from flax import nnx

    graph, state = _nnx_block()
    loss = lambda state, x, y: mse(nnx.merge(graph, state)(x), y)  # noqa: E731
    return jax.grad(loss), (state, spec((2, 32, 64)), spec((2, 32, 64)))


def nnx_dropout_adamw_step():
    """A training step as nnx writes it: an MLP with nnx.Dropout (threefry bits from the model's
    Rngs, a parameter), nnx.Optimizer with optax.adamw created on the first step, nnx.value_and_grad."""
    import optax
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.fc1, self.fc2 = nnx.Linear(16, 64, rngs=rngs), nnx.Linear(64, 10, rngs=rngs)
            self.drop = nnx.Dropout(0.25, rngs=rngs)

        def __call__(self, x):
            return self.fc2(self.drop(nnx.relu(self.fc1(x))))

    graph, state = nnx.split(nnx.eval_shape(lambda: MLP(nnx.Rngs(0))))

    def step(state, x, labels):
        model = nnx.merge(graph, state)
        optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
        loss_fn = lambda m: optax.softmax_cross_entropy_with_integer_labels(m(x), labels).mean()  # noqa: E731
        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss, nnx.state(model)
    return step, (state, spec((8, 16)), spec((8,), s32))


def nnx_mlp_bf16_grad():
    """nnx.Linear layers with bf16 parameters and compute; gradients of a squared error."""
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            kw = dict(dtype=bf16, param_dtype=bf16, rngs=rngs)
            self.layers = nnx.List([nnx.Linear(m, n, **kw) for m, n in ((32, 64), (64, 64), (64, 8))])

        def __call__(self, x):
            for layer in self.layers[:-1]:
                x = nnx.silu(layer(x))
            return self.layers[-1](x)

    graph, state = nnx.split(nnx.eval_shape(lambda: MLP(nnx.Rngs(0))))
    loss = lambda state, x, y: mse(nnx.merge(graph, state)(x), y)  # noqa: E731
    return jax.grad(loss), (state, spec((16, 32), bf16), spec((16, 8), bf16))


def nnx_vmap_ensemble():
    """Four MLPs made at once by `nnx.vmap` over split Rngs (parameters stacked on a leading axis)
    and applied to one batch by `nnx.vmap` again: an ensemble's mean prediction."""
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.fc1, self.fc2 = nnx.Linear(16, 32, rngs=rngs), nnx.Linear(32, 4, rngs=rngs)

        def __call__(self, x):
            return self.fc2(nnx.relu(self.fc1(x)))

    @nnx.split_rngs(splits=4)
    @nnx.vmap(in_axes=0, out_axes=0)
    def create(rngs):
        return MLP(rngs)

    @nnx.vmap(in_axes=(0, None), out_axes=0)
    def forward(model, x):
        return model(x)

    graph, state = nnx.split(nnx.eval_shape(lambda: create(nnx.Rngs(0))))
    return (lambda state, x: forward(nnx.merge(graph, state), x).mean(axis=0)), (state, spec((8, 16)))


def nnx_llama_bf16_grad():
    """A Llama-style block in bf16: `nnx.RMSNorm`, rotary position embeddings, grouped-query
    attention (8 query heads over 2 key/value heads) by `jax.nn.dot_product_attention` (causal),
    a SwiGLU MLP, the block under `nnx.remat` (rematerialized in the backward pass: optimization
    barriers); gradients of a squared error."""
    from flax import nnx

    d, heads, kv_heads, head_dim, seq = 64, 8, 2, 8, 32

    def rotary(x):  # [batch, seq, heads, head_dim]
        freqs = 1.0 / (10000.0 ** (jnp.arange(0, head_dim, 2) / head_dim))
        angles = jnp.arange(x.shape[1])[:, None] * freqs[None, :]
        cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
        x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
        return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).astype(x.dtype)

    class Block(nnx.Module):
        def __init__(self, rngs):
            kw = dict(use_bias=False, dtype=bf16, rngs=rngs)  # noqa: C408
            self.norm1 = nnx.RMSNorm(d, dtype=bf16, rngs=rngs)
            self.norm2 = nnx.RMSNorm(d, dtype=bf16, rngs=rngs)
            self.q, self.o = nnx.Linear(d, heads * head_dim, **kw), nnx.Linear(heads * head_dim, d, **kw)
            self.kv = nnx.Linear(d, 2 * kv_heads * head_dim, **kw)
            self.gate, self.up = nnx.Linear(d, 128, **kw), nnx.Linear(d, 128, **kw)
            self.down = nnx.Linear(128, d, **kw)

        def __call__(self, x):
            b, s, _ = x.shape
            h = self.norm1(x)
            q = rotary(self.q(h).reshape(b, s, heads, head_dim))
            k, v = jnp.split(self.kv(h).reshape(b, s, 2 * kv_heads, head_dim), 2, axis=2)
            attn = jax.nn.dot_product_attention(q, rotary(k), v, is_causal=True, implementation="xla")
            x = x + self.o(attn.reshape(b, s, heads * head_dim))
            h = self.norm2(x)
            return x + self.down(nnx.silu(self.gate(h)) * self.up(h))

    graph, state = nnx.split(nnx.eval_shape(lambda: Block(nnx.Rngs(0))))

    def loss(state, x, y):
        return mse(nnx.remat(lambda m, x: m(x))(nnx.merge(graph, state), x), y)
    return jax.grad(loss), (state, spec((2, seq, d), bf16), spec((2, seq, d), bf16))


BUILDERS = (linen_cnn_bn_grad, linen_cnn_bf16_grad, linen_resnet_bf16, linen_lstm_grad, linen_embed_xent_grad,
            linen_attention_bf16_grad, nnx_transformer_fwd, nnx_transformer_grad, nnx_dropout_adamw_step,
            nnx_mlp_bf16_grad, nnx_vmap_ensemble, linen_mlp_f16_loss_scale, nnx_llama_bf16_grad)
