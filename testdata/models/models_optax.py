"""The real-library tier's optax training steps; conventions in `models_common.py`."""

from __future__ import annotations

import jax
from jax import lax
from models_common import KEY, mse, spec


# -- optax --------------------------------------------------------------------------------------------
def _mlp_params(sizes):
    return [{"w": spec((m, n)), "b": spec((n,))} for m, n in zip(sizes[:-1], sizes[1:])]


def _mlp(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def optax_adam_scan():
    """Three Adam steps under `lax.scan` over batches (the optimizer state made by `init` before
    the loop, as a training script does), a plain-jnp MLP; the final parameters and the losses."""
    import optax

    tx = optax.adam(1e-2)

    def train(params, xs, ys):
        def step(carry, batch):
            params, state = carry
            loss, grads = jax.value_and_grad(lambda p: mse(_mlp(p, batch[0]), batch[1]))(params)
            updates, state = tx.update(grads, state, params)
            return (optax.apply_updates(params, updates), state), loss
        (params, _), losses = lax.scan(step, (params, tx.init(params)), (xs, ys))
        return params, losses
    return train, (_mlp_params([64, 128, 10]), spec((3, 32, 64)), spec((3, 32, 10)))


def optax_adamw_clip():
    """`optax.chain(clip_by_global_norm, adamw)` with a warmup-cosine schedule: two steps of a
    linen MLP from a fresh optimizer state; the new parameters, state and loss."""
    import flax.linen as nn
    import optax

    model = nn.Sequential([nn.Dense(32), nn.gelu, nn.Dense(32), nn.gelu, nn.Dense(4)])
    x, y = spec((8, 16)), spec((8, 4))
    params = jax.eval_shape(model.init, KEY, x)
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=1e-2))

    def train(params, x, y):
        state = tx.init(params)
        for _ in range(2):
            loss, grads = jax.value_and_grad(lambda p: mse(model.apply(p, x), y))(params)
            updates, state = tx.update(grads, state, params)
            params = optax.apply_updates(params, updates)
        return params, state, loss
    return train, (params, x, y)


def optax_sgd_momentum():
    """One step of `optax.sgd` with Nesterov momentum on a haiku MLP, the momentum a parameter
    (any value is a valid trace), global-norm gradient clipping first."""
    import haiku as hk
    import optax

    f = hk.without_apply_rng(hk.transform(lambda x: hk.nets.MLP([32, 32, 4])(x)))
    x, y = spec((8, 16)), spec((8, 4))
    params = jax.eval_shape(f.init, KEY, x)
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.sgd(0.1, momentum=0.9, nesterov=True))
    state = jax.eval_shape(tx.init, params)

    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(lambda p: mse(f.apply(p, x), y))(params)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss
    return step, (params, state, x, y)


BUILDERS = (optax_adam_scan, optax_adamw_clip, optax_sgd_momentum)
