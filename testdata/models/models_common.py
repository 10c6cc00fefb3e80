"""What the real-library tier's model files share (`models_flax.py`, `models_equinox_haiku.py`,
`models_optax.py` beside this file; `make_modules.py` lowers them).

Each builder returns `(fn, args)`: the function jax lowers and the abstract arguments
(`jax.ShapeDtypeStruct` pytrees: the model's parameters as the library shapes them, its mutable
state, the data). Layers are built abstractly (`jax.eval_shape`, `nnx.eval_shape`,
`eqx.filter_eval_shape`), so no weights are drawn here; hlo-run draws every entry parameter from
--seed. State whose values must satisfy an invariant (Adam's second moments are >= 0) is created
inside the function, as a training script does on its first step; state without one (SGD's
momentum, BatchNorm's running averages in training mode) is a parameter. Labels and token ids
are s32 parameters (hlo-run draws them in [-8, 7]; jnp.take and take_along_axis wrap negative
ones), so every class count and vocabulary is above 8.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

f32, bf16, f16, s32 = jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32
KEY = jax.random.key(0)


def spec(shape, dtype=f32):
    return jax.ShapeDtypeStruct(shape, dtype)


def mse(a, b):
    """Mean squared error in f32 (also for bf16 models, as their losses are usually computed)."""
    return jnp.mean(jnp.square(a.astype(f32) - b.astype(f32)))
