"""The real-library tier's equinox and haiku models; conventions in `models_common.py`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from models_common import KEY, bf16, mse, s32, spec


# -- equinox ------------------------------------------------------------------------------------------
def _eqx(make, fn):
    """An equinox model's arrays (as ShapeDtypeStructs) and `fn` taking them in its place: jax.jit
    takes arrays only, so the rest of the model (activations, sizes) is closed over, as
    `eqx.filter_jit` does."""
    import equinox as eqx

    is_array = lambda leaf: isinstance(leaf, jax.ShapeDtypeStruct)  # noqa: E731
    arrays, static = eqx.partition(eqx.filter_eval_shape(make), is_array)
    return (lambda arrays, *rest: fn(eqx.combine(arrays, static), *rest)), arrays


def eqx_vmap_linear():
    """`jax.vmap` over an `eqx.nn.Linear` (equinox layers take one example): the dot comes out
    [out, batch] and jax transposes it, marking the result column-major (the issue's module)."""
    import equinox as eqx

    fn, arrays = _eqx(lambda: eqx.nn.Linear(16, 128, key=KEY), lambda layer, x: jax.vmap(layer)(x))
    return fn, (arrays, spec((4, 16)))


def eqx_mlp_vmap_grad():
    """`eqx.nn.MLP` vmapped over a batch, `eqx.filter_value_and_grad` of a squared error."""
    import equinox as eqx

    loss = eqx.filter_value_and_grad(lambda mlp, x, y: mse(jax.vmap(mlp)(x), y))
    fn, arrays = _eqx(lambda: eqx.nn.MLP(48, 10, 128, 2, activation=jax.nn.gelu, key=KEY), loss)
    return fn, (arrays, spec((32, 48)), spec((32, 10)))


def eqx_gru_scan_grad():
    """`eqx.nn.GRUCell` under `lax.scan` over time, vmapped over the batch, a Linear readout of
    the last state; the gradient of a squared error."""
    import equinox as eqx

    keys = jax.random.split(KEY)

    def run(model, xs):  # one sequence [time, features]
        cell, head = model
        h, _ = lax.scan(lambda h, x: (cell(x, h), None), jnp.zeros(32), xs)
        return head(h)

    grad = eqx.filter_grad(lambda model, xs, y: mse(jax.vmap(run, in_axes=(None, 0))(model, xs), y))
    fn, arrays = _eqx(lambda: (eqx.nn.GRUCell(8, 32, key=keys[0]), eqx.nn.Linear(32, 4, key=keys[1])), grad)
    return fn, (arrays, spec((4, 10, 8)), spec((4, 4)))


def eqx_scan_layers_grad():
    """Six residual layers made at once by `eqx.filter_vmap` over keys (weights stacked on a
    leading axis) and applied by `lax.scan` over that axis, equinox's way to compile a deep stack
    once; vmapped over the batch; the gradient of a squared error."""
    import equinox as eqx

    class Layer(eqx.Module):
        norm: eqx.nn.LayerNorm
        linear: eqx.nn.Linear

        def __init__(self, key):
            self.norm, self.linear = eqx.nn.LayerNorm(64), eqx.nn.Linear(64, 64, key=key)

        def __call__(self, x):
            return x + jnp.tanh(self.linear(self.norm(x)))

    def forward(stack, x):
        arrays, static = eqx.partition(stack, eqx.is_array)
        body = lambda h, layer: (eqx.combine(layer, static)(h), None)  # noqa: E731
        return lax.scan(body, x, arrays)[0]

    grad = eqx.filter_grad(lambda stack, x, y: mse(jax.vmap(forward, in_axes=(None, 0))(stack, x), y))
    fn, arrays = _eqx(lambda: eqx.filter_vmap(Layer)(jax.random.split(KEY, 6)), grad)
    return fn, (arrays, spec((16, 64)), spec((16, 64)))


def eqx_mha_fwd():
    """`eqx.nn.MultiheadAttention` (it vmaps over heads inside), vmapped over the batch."""
    import equinox as eqx

    make = lambda: eqx.nn.MultiheadAttention(4, 64, use_query_bias=True, use_output_bias=True, key=KEY)  # noqa: E731
    fn, arrays = _eqx(make,
                      lambda mha, x: jax.vmap(lambda s: mha(s, s, s))(x))
    return fn, (arrays, spec((2, 32, 64)))


def eqx_conv_bf16():
    """Two `eqx.nn.Conv2d` in bf16 (channels first, one example, vmapped over the batch) with relu
    and a max pool."""
    import equinox as eqx

    keys = jax.random.split(KEY)

    def forward(model, x):
        conv1, pool, conv2 = model
        return jax.nn.relu(conv2(pool(jax.nn.relu(conv1(x)))))

    fn, arrays = _eqx(lambda: (eqx.nn.Conv2d(3, 8, 3, padding=1, dtype=bf16, key=keys[0]),
                               eqx.nn.MaxPool2d(2, 2),
                               eqx.nn.Conv2d(8, 16, 3, padding=1, dtype=bf16, key=keys[1])),
                      lambda model, x: jax.vmap(forward, in_axes=(None, 0))(model, x))
    return fn, (arrays, spec((2, 3, 12, 12), bf16))


def eqx_conv_bn_grad():
    """`eqx.nn.Conv2d` and `eqx.nn.BatchNorm` (batch statistics across `jax.vmap`'s named axis,
    the running averages in an `eqx.nn.State`), a strided conv, a Linear head; cross-entropy on
    integer labels; the loss, the gradient and the new state."""
    import equinox as eqx
    import optax

    keys = jax.random.split(KEY, 3)

    class Net(eqx.Module):
        conv1: eqx.nn.Conv2d
        norm: eqx.nn.BatchNorm
        conv2: eqx.nn.Conv2d
        head: eqx.nn.Linear

        def __init__(self):
            self.conv1 = eqx.nn.Conv2d(3, 8, 3, key=keys[0])
            self.norm = eqx.nn.BatchNorm(8, "batch", mode="batch")
            self.conv2 = eqx.nn.Conv2d(8, 16, 3, stride=2, key=keys[1])
            self.head = eqx.nn.Linear(16, 10, key=keys[2])

        def __call__(self, x, state):
            x, state = self.norm(self.conv1(x), state)
            return self.head(jnp.mean(jax.nn.relu(self.conv2(jax.nn.relu(x))), axis=(1, 2))), state

    def step(pair, x, labels):
        model, state = pair

        def loss(model):
            batched = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
            logits, new_state = batched(x, state)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), new_state
        (value, new_state), grads = eqx.filter_value_and_grad(loss, has_aux=True)(model)
        return value, grads, new_state
    fn, arrays = _eqx(eqx.nn.make_with_state(Net), step)
    return fn, (arrays, spec((4, 3, 12, 12)), spec((4,), s32))


def eqx_moe_topk_grad():
    """A mixture-of-experts layer: a router picks each token's top 2 of 4 experts (`lax.top_k`),
    softmax over their logits, the experts (`eqx.nn.MLP`s stacked by `eqx.filter_vmap`) run on
    every token by `jax.vmap` and are combined by the gates (a one-hot dispatch, as dense MoE code
    does); the loss, its gradient and the router's load per expert."""
    import equinox as eqx

    keys = jax.random.split(KEY)

    def layer(model, x):  # x [tokens, d]
        router, experts = model
        logits = jax.vmap(router)(x)
        top, idx = lax.top_k(logits, 2)
        weights = jax.nn.softmax(top, axis=-1)
        gates = jnp.sum(jax.nn.one_hot(idx, 4) * weights[..., None], axis=1)  # [tokens, 4]
        outs = eqx.filter_vmap(lambda e: jax.vmap(e)(x))(experts)  # [4, tokens, d]
        return jnp.einsum("te,etd->td", gates, outs), jnp.mean(gates > 0, axis=0)

    def loss(model, x, y):
        out, load = layer(model, x)
        return mse(out, y), load

    def step(model, x, y):
        (value, load), grads = eqx.filter_value_and_grad(loss, has_aux=True)(model, x, y)
        return value, load, grads
    make = lambda: (eqx.nn.Linear(32, 4, key=keys[0]),  # noqa: E731
                    eqx.filter_vmap(lambda k: eqx.nn.MLP(32, 32, 64, 1, key=k))(jax.random.split(keys[1], 4)))
    fn, arrays = _eqx(make, step)
    return fn, (arrays, spec((64, 32)), spec((64, 32)))


# -- haiku --------------------------------------------------------------------------------------------
def hk_lstm_unroll():
    """`hk.LSTM` run by `hk.dynamic_unroll` (a `lax.scan`, time major) and an `hk.Linear` readout."""
    import haiku as hk

    def net(xs):
        core = hk.LSTM(32)
        out, _ = hk.dynamic_unroll(core, xs, core.initial_state(xs.shape[1]))
        return hk.Linear(4)(out)

    f = hk.without_apply_rng(hk.transform(net))
    xs = spec((10, 4, 8))
    return f.apply, (jax.eval_shape(f.init, KEY, xs), xs)


def hk_transformer_bf16():
    """A haiku transformer block (`hk.MultiHeadAttention`, `hk.LayerNorm`, gelu MLP) with f32
    parameters cast to bf16 for the compute, the usual mixed-precision policy."""
    import haiku as hk

    def net(x):
        y = hk.LayerNorm(-1, True, True)(x)
        x = x + hk.MultiHeadAttention(4, 16, model_size=64, w_init=hk.initializers.VarianceScaling())(y, y, y)
        y = hk.LayerNorm(-1, True, True)(x)
        return x + hk.Linear(64)(jax.nn.gelu(hk.Linear(256)(y)))

    f = hk.without_apply_rng(hk.transform(net))
    x = spec((2, 32, 64), bf16)
    params = jax.eval_shape(f.init, KEY, x)

    def forward(params, x):
        return f.apply(jax.tree.map(lambda p: p.astype(bf16), params), x)
    return forward, (jax.tree.map(lambda p: spec(p.shape), params), x)


def hk_conv_bn_train():
    """`hk.Conv2D` and `hk.BatchNorm` in training mode (`transform_with_state`: the moving
    averages are state), relu, `hk.avg_pool`, `hk.Linear`; the logits and the new state."""
    import haiku as hk

    def net(x):
        for channels in (8, 16):
            x = jax.nn.relu(hk.BatchNorm(True, True, 0.9)(hk.Conv2D(channels, 3)(x), is_training=True))
        x = hk.avg_pool(x, 2, 2, "VALID")
        return hk.Linear(10)(hk.Flatten()(x))

    f = hk.without_apply_rng(hk.transform_with_state(net))
    x = spec((4, 8, 8, 3))
    params, state = jax.eval_shape(f.init, KEY, x)
    return f.apply, (params, state, x)


BUILDERS = (eqx_vmap_linear, eqx_mlp_vmap_grad, eqx_gru_scan_grad, eqx_scan_layers_grad, eqx_mha_fwd,
            eqx_conv_bf16,
            eqx_conv_bn_grad, eqx_moe_topk_grad, hk_lstm_unroll, hk_transformer_bf16, hk_conv_bn_train)
