"""Run a small JAX program on XLA:CPU with XLA's dump flags set, so that XLA itself writes the
HloModuleProto (`*.hlo.pb`, before and after its optimizations), the text of the same modules
(`*.txt`) and an HloSnapshot (`*.snapshot.*.pb`) with the real arguments and result.

    python make_proto_dumps.py DIR        (the proto tests run it in a subprocess: XLA_FLAGS is read once)
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = (f"--xla_dump_to={sys.argv[1]} --xla_dump_hlo_as_proto --xla_dump_hlo_as_text "
                           "--xla_dump_hlo_snapshots")
os.environ["JAX_PLATFORMS"] = "cpu"

import jax
import jax.numpy as jnp


def proto_probe(x, y, k):
    """Dot, reduce, compare/select, gather by an integer index, a bf16 cast and a tuple result."""
    h = jnp.tanh(x @ y)
    s = jnp.sum(h, axis=1)
    picked = jnp.take(h, k, axis=0)
    return jnp.where(s > 0, s, -s).astype(jnp.bfloat16), picked, jnp.argmax(h, axis=1)


x = (jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4) - 5.5) / 8  # exact in f32
y = jnp.cos(jnp.arange(20.0, dtype=jnp.float32)).reshape(4, 5)
k = jnp.array([2, 0], dtype=jnp.int32)
jax.block_until_ready(jax.jit(proto_probe)(x, y, k))
