"""Regenerate the SPMD tier's inputs: `testdata/spmd/<name>_n<N>.hlo`, `.npz` and `xla.json`.

The input of `tests/spmd/` (issue 17 items 4 and 6): sharded jax programs on meshes of 2, 4 and 8
CPU devices (a data-parallel MLP training step, a Megatron column-then-row MLP, 2-D meshes, dots
over sharded batch, contracting and non-contracting dims, reductions over sharded dims,
reshardings). For each program:

- `<name>.hlo`: the pre-optimization HLO jax hands to XLA, `jax.jit(f, in_shardings=...,
  out_shardings=...).lower(*args).as_text(dialect="hlo")`, with its Shardy attributes and
  `sharding=` annotations and no device count (jax passes it in compile options);
- `<name>.npz`: the global arguments (`arg0`, ...) and XLA:CPU's global results (`out0`, ...) on
  N host devices;
- `xla.json`: per module, the number of each collective in XLA:CPU's partitioned program
  (`.compile().as_text()`) and the bytes one device sends in them
  (`hlo_common.analysis.collective_traffic`), what ours is measured against.

    .venv/bin/python testdata/spmd/make_modules.py            # write every module
    .venv/bin/python testdata/spmd/make_modules.py -k megatron
    .venv/bin/python testdata/spmd/make_modules.py --check    # exit 1 if a file differs
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVICES = 8
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={DEVICES}").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402 - the flag above must be set before jax creates its CPU client
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from hlo_common.analysis.collective_traffic import collective_traffic  # noqa: E402
from hlo_common.hlo.parser import parse_module  # noqa: E402


def mesh(*shape_and_names) -> Mesh:
    sizes = [s for s, _ in shape_and_names]
    names = tuple(n for _, n in shape_and_names)
    return Mesh(np.array(jax.devices()[:int(np.prod(sizes))]).reshape(sizes), names)


def program(m: Mesh, f, args, out_specs):
    """(jitted f, [(shape, spec)], mesh): arguments are f32 arrays sharded by their specs."""
    in_shardings = tuple(NamedSharding(m, spec) for _, spec in args)
    outs = jax.tree.map(lambda s: NamedSharding(m, s), out_specs, is_leaf=lambda x: isinstance(x, P))
    return jax.jit(f, in_shardings=in_shardings, out_shardings=outs), [s for s, _ in args], m


def _mlp(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def _dp_step(x, y, w1, w2):
    def loss(w1, w2):
        return jnp.mean((_mlp(x, w1, w2) - y) ** 2)
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def _programs_for(n: int) -> dict:
    x1 = mesh((n, "x"))
    progs = {
        "dp_mlp_step": program(x1, _dp_step, [((4 * n, 8), P("x")), ((4 * n, 4), P("x")),
                                              ((8, 16), P()), ((16, 4), P())], (P(), P())),
        "megatron_mlp": program(x1, _mlp, [((8, 16), P()), ((16, 8 * n), P(None, "x")),
                                           ((8 * n, 16), P("x", None))], P()),
        "batch_dot": program(x1, lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
                             [((2 * n, 4, 8), P("x")), ((2 * n, 8, 3), P("x"))], P("x")),
        "contracting_dot": program(x1, lambda a, b: a @ b,
                                   [((6, 4 * n), P(None, "x")), ((4 * n, 5), P("x"))], P()),
        "dot_reduce_scatter": program(x1, lambda a, b: a @ b,
                                      [((4 * n, 4 * n), P(None, "x")), ((4 * n, 6), P("x"))], P("x")),
        "sum_sharded_rows": program(x1, lambda a: (jnp.sum(a, axis=0), jnp.max(a, axis=1)),
                                    [((4 * n, 6), P("x"))], (P(), P("x"))),
        "reshard_rows_to_cols": program(x1, lambda a: a * 2.0, [((2 * n, 4 * n), P("x", None))],
                                        P(None, "x")),
        "transpose_reshape": program(x1, lambda a: jnp.transpose(a.reshape(2 * n, 3, 4), (2, 0, 1)) + 1.0,
                                     [((2 * n, 12), P("x"))], P(None, "x")),
        "broadcast_add": program(x1, lambda a, b: jnp.exp(a + b[None, :]),
                                 [((2 * n, 8), P("x")), ((8,), P())], P("x")),
    }
    progs.update(_window_programs(n, x1))
    progs.update(_loop_programs(n, x1))
    progs.update(_gather_programs(n, x1))
    progs.update(_conv_programs(n, x1))
    progs.update(_uneven_programs(n, x1))
    progs["shard_map_psum"] = program(
        x1, lambda a, b: jnp.tanh(jax.shard_map(lambda u, v: jax.lax.psum(u @ v, "x"), mesh=x1,
                                                in_specs=(P(None, "x"), P("x", None)), out_specs=P(),
                                                check_vma=False)(a, b)),
        [((8, 4 * n), P(None, "x")), ((4 * n, 4), P("x", None))], P())
    progs["shard_map_all_gather"] = program(
        x1, lambda a: jax.shard_map(lambda u: jax.lax.all_gather(jnp.exp(u), "x", tiled=True) * 2.0, mesh=x1,
                                    in_specs=P("x"), out_specs=P(), check_vma=False)(a + 1.0),
        [((2 * n, 3), P("x"))], P())
    if n >= 4:
        xy = mesh((2, "x"), (n // 2, "y"))
        progs["mesh2d_mlp"] = program(xy, _mlp, [((8, 16), P("x", None)), ((16, 4 * n), P(None, "y")),
                                                 ((4 * n, 8), P("y", None))], P("x", None))
        progs["mesh2d_reshard"] = program(xy, lambda a: jnp.sin(a),
                                          [((4 * n, 4 * n), P("x", "y"))], P("y", "x"))
        progs["embedding_2d"] = program(xy, lambda t, i: jnp.take(t, i, axis=0) * 2.0,
                                        [((16 * n, 8), P("y", None)), (("s32", (4 * n,), 16 * n), P("x"))],
                                        P("x", None))
        progs["mesh2d_reduce"] = program(xy, lambda a: jnp.sum(a * a, axis=(0, 1)),
                                         [((4 * n, 2 * n, 3), P("x", "y"))], P())
    return progs


def _kv_cache(cache, new, pos):
    """A cache split along the sequence: one position written and two read at a run-time offset."""
    cache = jax.lax.dynamic_update_slice(cache, jnp.tanh(new), (0, pos, 0))
    return cache, jax.lax.dynamic_slice(cache, (0, pos, 0), (2, 2, 4)) * 2.0


def _window_programs(n: int, x1: Mesh) -> dict:
    """Slice, pad, concatenate, dynamic-(update-)slice and iota on arrays sharded along the dim
    they work on (halo exchange) or beside it."""
    rows = P("x")
    return {
        "roll_rows": program(x1, lambda a: jnp.roll(a, 3, axis=0) * 2.0, [((8 * n, 4), rows)], rows),
        "pad_rows": program(x1, lambda a: jnp.pad(jnp.tanh(a), ((4, 4), (0, 0)), constant_values=1.5),
                            [((8 * n, 4), rows)], rows),
        "halves_sum": program(x1, lambda a: a[:4 * n] + a[4 * n:], [((8 * n, 6), rows)], rows),
        "concat_rows": program(x1, lambda a, b: jnp.concatenate([a, jnp.exp(b)], axis=0),
                               [((4 * n, 3), rows), ((4 * n, 3), rows)], rows),
        "random_rows": program(x1, lambda a: a + jax.random.uniform(jax.random.key(7), (8 * n, 5)),
                               [((8 * n, 5), rows)], rows),
        "kv_cache": program(x1, _kv_cache, [((2, 8 * n, 4), P(None, "x")), ((2, 1, 4), P()),
                                             (("s32", (), 8 * n), P())], (P(None, "x"), P())),
        "sort_rows": program(x1, lambda a: (jnp.sort(a, axis=1), jnp.argsort(a, axis=1)), [((8 * n, 6), rows)],
                             (rows, rows)),
        "iota_rows": program(x1, lambda a: a * jnp.arange(8 * n, dtype=jnp.float32)[:, None],
                             [((8 * n, 5), rows)], rows),
        "dynamic_slice_cols": program(
            x1, lambda a, b: jax.lax.dynamic_update_slice(
                a, jax.lax.dynamic_slice_in_dim(b, 2, 3, axis=1) + 1.0, (0, 1)),
            [((4 * n, 6), rows), ((4 * n, 8), rows)], rows),
    }


def _scan(c, xs):
    def step(c, x):
        c = jnp.tanh(c * x[None, :] + 1.0)
        return c, jnp.sum(c, axis=1)
    return jax.lax.scan(step, c, xs)


def _gather_programs(n: int, x1: Mesh) -> dict:
    """Embedding lookups (indices split by batch; a table split by rows, vocabulary-parallel)
    and scatter-adds into a table split by columns and by rows."""
    ids = ("s32", (4 * n,), 4 * n)
    take = lambda t, i: jnp.take(t, i, axis=0) * 2.0  # noqa: E731
    scatter = lambda t, i, u: t.at[i].add(jnp.tanh(u))  # noqa: E731
    return {
        "embedding_batch": program(x1, take, [((4 * n, 8), P()), (ids, P("x"))], P("x")),
        "embedding_vocab": program(x1, take, [((16 * n, 8), P("x")), (("s32", (4 * n,), 16 * n), P())], P()),
        "scatter_add_cols": program(x1, scatter, [((4 * n, 2 * n), P(None, "x")), (ids, P()),
                                                  ((4 * n, 2 * n), P(None, "x"))], P(None, "x")),
        "scatter_add_batch": program(x1, scatter, [((16, 6), P()), (ids, P("x")), ((4 * n, 6), P("x"))], P()),
        "scatter_add_rows": program(x1, scatter, [((4 * n, 6), P("x")), (ids, P()), ((4 * n, 6), P())],
                                    P("x")),
    }


def _conv(x, k):
    return jnp.tanh(jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                                 dimension_numbers=("NCHW", "OIHW", "NCHW")))


def _conv_programs(n: int, x1: Mesh) -> dict:
    """Convolutions split over the batch (data parallel), the output features and image rows;
    max-pooling over split rows."""
    return {
        "conv_batch": program(x1, _conv, [((2 * n, 3, 8, 8), P("x")), ((4, 3, 3, 3), P())], P("x")),
        "conv_out_features": program(x1, _conv, [((2, 3, 8, 8), P()), ((2 * n, 3, 3, 3), P("x"))],
                                     P(None, "x")),
        "maxpool_rows": program(x1, lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 3, 3),
                                                                   (1, 1, 2, 2), "SAME"),
                                [((2, 3, 8 * n, 6), P(None, None, "x"))], P(None, None, "x")),
        "conv_spatial": program(x1, _conv, [((2, 3, 4 * n, 6), P(None, None, "x")), ((4, 3, 3, 3), P())],
                                P(None, None, "x")),
    }


def _scan_zero_carry(xs):
    return jax.lax.scan(lambda c, x: (jnp.tanh(c + x), None), jnp.zeros(xs.shape[1:]), xs)[0]


def _cond(a):
    return jax.lax.cond(jnp.sum(a) > 0.0, lambda v: jnp.exp(v) - jnp.max(v, axis=1, keepdims=True),
                        lambda v: v * 2.0, a)


def _loop_programs(n: int, x1: Mesh) -> dict:
    """lax.scans whose carry and stacked outputs stay sharded through the loop: split from the
    start, or split by the scanned inputs alone (the carry starts as replicated zeros); a
    lax.cond on a split array."""
    return {"scan_carry": program(x1, _scan, [((4 * n, 4), P("x")), ((5, 4), P())], (P("x"), P(None, "x"))),
            "scan_split_inputs": program(x1, _scan_zero_carry, [((5, 4 * n, 4), P(None, "x"))], P()),
            "cond_rows": program(x1, _cond, [((4 * n, 6), P("x"))], P("x"))}


def _uneven_programs(n: int, x1: Mesh) -> dict:
    """Values split where the dim does not divide by the device count (8n - 1 rows or columns:
    XLA pads the last tile), constrained inside the program (jax's arguments split evenly)."""
    rows = NamedSharding(x1, P("x"))
    cols = NamedSharding(x1, P(None, "x"))
    wsc = jax.lax.with_sharding_constraint
    k = 8 * n - 1

    def rows_sum(a):  # elementwise on the uneven tiles, then a reduce over the split rows
        t = wsc(jnp.tanh(a[:k]) * 2.0, rows)
        return t.sum(axis=0), t.max(axis=0)

    def norm(a):  # a layer norm over each uneven-split row, then each column's mean
        t = wsc(a[:k], rows)
        y = (t - t.mean(axis=1, keepdims=True)) / jnp.sqrt(t.var(axis=1, keepdims=True) + 1e-5)
        return y.mean(axis=0)

    def contract(a, b):  # a contraction over an uneven split dim
        return wsc(a[:, :k], cols) @ wsc(b[:k], rows)

    return {
        "uneven_rows_sum": program(x1, rows_sum, [((8 * n, 6), P("x"))], (P(), P())),
        "uneven_norm": program(x1, norm, [((8 * n, 6), P("x"))], P()),
        "uneven_contract": program(x1, contract, [((4, 8 * n), P(None, "x")), ((8 * n, 3), P("x"))], P()),
    }


def all_programs() -> dict:
    out = {}
    for n in (2, 4, 8):
        for name, prog in _programs_for(n).items():
            out[f"{name}_n{n}"] = prog
    return out


def _arguments(name: str, shapes) -> list[np.ndarray]:
    """f32 normals; an s32 argument (shape ("s32", dims, high)) holds integers in [0, high)."""
    rng = np.random.default_rng([sum(map(ord, name)), len(shapes)])  # the same on every run
    return [rng.integers(0, s[2], s[1]).astype(np.int32) if s[0] == "s32" else
            rng.standard_normal(s).astype(np.float32) for s in shapes]


def build(name: str, prog) -> tuple[str, bytes, dict]:
    fn, shapes, m = prog
    args = _arguments(name, shapes)
    placed = [jax.device_put(a, s) for a, s in zip(args, fn.lower(*args).compile().input_shardings[0])]
    lowered = fn.lower(*args)
    text = lowered.as_text(dialect="hlo")
    compiled = lowered.compile()
    results = jax.tree.leaves(compiled(*placed))
    buf = io.BytesIO()
    arrays = {f"arg{k}": a for k, a in enumerate(args)}
    arrays.update({f"out{k}": np.asarray(r) for k, r in enumerate(results)})
    np.savez(buf, **arrays)
    partitioned = parse_module(compiled.as_text(), f"{name} (XLA:CPU)")
    counts, sent = collective_traffic(partitioned, 1, len(m.devices.flat))
    return text, buf.getvalue(), {"collectives": counts, "bytes_sent": sent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only programs whose name contains this")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    opts = parser.parse_args()
    summary_path = HERE / "xla.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    differ = []
    for name, prog in all_programs().items():
        if opts.k not in name:
            continue
        text, data, counts = build(name, prog)
        hlo = HERE / f"{name}.hlo"
        if opts.check:
            if not hlo.exists() or hlo.read_text() != text or summary.get(name) != counts:
                differ.append(name)
            continue
        hlo.write_text(text)
        (HERE / f"{name}.npz").write_bytes(data)
        summary[name] = counts
        print(name, counts)
    if opts.check:
        if differ:
            print("differ:", " ".join(differ), file=sys.stderr)
            sys.exit(1)
        return
    summary_path.write_text(json.dumps(dict(sorted(summary.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
