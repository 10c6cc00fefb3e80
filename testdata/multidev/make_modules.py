"""Regenerate the multi-device tier's modules: `testdata/multidev/<name>.hlo`.

The input of `tests/multidev/test_multidev.py` (issue 16 item 6): programs on 2, 4 and 8 devices
as people write them with jax (`shard_map` with psum, pmean, pmax, all_gather tiled and not,
psum_scatter, all_to_all, ppermute rings, 2-D meshes grouping one axis or both, axis_index;
groups of 3 and 6 devices with pieces of odd sizes;
`pmap` (which jax 0.10 lowers through shard_map: partitions, not replicas); and `jax.jit` of a sharded MLP, attention block and data-parallel training step, which
XLA's SPMD partitioner splits). Each file is the per-device program XLA:CPU compiled for
jax's CPU devices, `jax.jit(f).lower(*args).compile().as_text()`: an optimized, partitioned module
with `num_partitions` (or, from pmap, `replica_count`) N and the collectives XLA wrote. Shapes are
small; the files are the same on every run with the pinned jax.

    .venv/bin/python testdata/multidev/make_modules.py             # write every module
    .venv/bin/python testdata/multidev/make_modules.py -k ring      # only names containing `ring`
    .venv/bin/python testdata/multidev/make_modules.py --check     # exit 1 if a file differs
    .venv/bin/python testdata/multidev/make_modules.py --list

Checked in rather than made at test time, so that a failure reproduces from the file with
`hlo-run --platform interpreter --reference-platform xla-cpu m.hlo`.
"""

from __future__ import annotations

import argparse
import os
import re
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

F32 = jnp.float32


def mesh(*shape_and_names) -> Mesh:
    """A mesh over the first devices: mesh((4, "x")) or mesh((4, "x"), (2, "y"))."""
    sizes = [s for s, _ in shape_and_names]
    names = tuple(n for _, n in shape_and_names)
    return Mesh(np.array(jax.devices()[:int(np.prod(sizes))]).reshape(sizes), names)


def arg(m: Mesh, shape, spec, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(m, spec))


def smap(m: Mesh, f, in_specs, out_specs):
    return jax.jit(jax.shard_map(f, mesh=m, in_specs=in_specs, out_specs=out_specs, check_vma=False))


# -- the programs: name -> (jitted function, abstract arguments) --------------------------------------

def _collectives_1d() -> dict:
    out = {}
    for n in (2, 4, 8):
        m = mesh((n, "x"))
        out[f"psum_n{n}"] = (smap(m, lambda a: jax.lax.psum(a, "x"), P("x"), P()), [arg(m, (4 * n, 8), P("x"))])
    m4, m8 = mesh((4, "x")), mesh((8, "x"))
    out["pmean_n4"] = (smap(m4, lambda a: jax.lax.pmean(jnp.tanh(a), "x"), P("x"), P()),
                       [arg(m4, (8, 16), P("x"))])
    out["pmax_pmin_n4"] = (smap(m4, lambda a: (jax.lax.pmax(a, "x"), jax.lax.pmin(a, "x")), P("x"), (P(), P())),
                           [arg(m4, (8, 6), P("x"))])
    out["psum_s32_n4"] = (smap(m4, lambda a: jax.lax.psum(a * 3, "x"), P("x"), P()),
                          [arg(m4, (8, 5), P("x"), jnp.int32)])
    out["all_gather_untiled_n4"] = (smap(m4, lambda a: jax.lax.all_gather(a, "x"), P("x"), P()),
                                    [arg(m4, (8, 3), P("x"))])
    for n, mm in ((4, m4), (8, m8)):
        out[f"all_gather_tiled_n{n}"] = (
            smap(mm, lambda a: jax.lax.all_gather(a + 1, "x", axis=1, tiled=True), P("x"), P()),
            [arg(mm, (2 * n, 5), P("x"))])
        out[f"psum_scatter_n{n}"] = (
            smap(mm, lambda a: jax.lax.psum_scatter(a, "x", scatter_dimension=0, tiled=True), P("x"), P("x")),
            [arg(mm, (4 * n * n, 3), P("x"))])
        out[f"all_to_all_n{n}"] = (
            smap(mm, lambda a: jax.lax.all_to_all(a, "x", 0, 1, tiled=True), P("x"), P("x")),
            [arg(mm, (n * n, 2 * n), P("x"))])
        ring = [(i, (i + 1) % n) for i in range(n)]
        out[f"ppermute_ring_n{n}"] = (
            smap(mm, lambda a, ring=ring: jax.lax.ppermute(a * 2, "x", ring), P("x"), P("x")),
            [arg(mm, (2 * n, 4), P("x"))])
    m2 = mesh((2, "x"))
    out["ppermute_shift_n2"] = (smap(m2, lambda a: jax.lax.ppermute(a, "x", [(0, 1)]), P("x"), P("x")),
                                [arg(m2, (4, 4), P("x"))])
    out["axis_index_n8"] = (smap(m8, lambda a: a * jax.lax.axis_index("x").astype(F32), P("x"), P("x")),
                            [arg(m8, (16, 2), P("x"))])
    return out


def _collectives_2d() -> dict:
    m, m22 = mesh((4, "x"), (2, "y")), mesh((2, "x"), (2, "y"))
    spec = P("x", "y")
    a = [arg(m, (8, 4), spec)]
    return {
        "mesh2d_psum_x_n8": (smap(m, lambda v: jax.lax.psum(v, "x"), spec, P(None, "y")), a),
        "mesh2d_psum_y_n8": (smap(m, lambda v: jax.lax.psum(v, "y"), spec, P("x")), a),
        "mesh2d_psum_xy_n8": (smap(m, lambda v: jax.lax.psum(v, ("x", "y")), spec, P()), a),
        "mesh2d_all_gather_y_n8": (smap(m, lambda v: jax.lax.all_gather(v, "y", axis=1, tiled=True), spec,
                                        P("x")), a),
        "mesh2d_all_to_all_x_n8": (smap(m, lambda v: jax.lax.all_to_all(v, "x", 1, 0, tiled=True), spec, spec),
                                   [arg(m, (8, 16), spec)]),
        "mesh2d_ppermute_y_n8": (smap(m, lambda v: jax.lax.ppermute(v, "y", [(0, 1), (1, 0)]), spec, spec), a),
        "mesh2d_psum_scatter_x_n4": (
            smap(m22, lambda v: jax.lax.psum_scatter(v, "x", scatter_dimension=0, tiled=True), spec, spec),
            [arg(m22, (8, 4), spec)]),
        "mesh2d_axis_index_n4": (
            smap(m22, lambda v: v + 10 * jax.lax.axis_index("x") + jax.lax.axis_index("y"), spec, spec),
            [arg(m22, (4, 4), spec)]),
    }


def _pmaps() -> dict:
    def idx(v):
        return v * jax.lax.axis_index("i").astype(F32) + jax.lax.psum(v, "i")

    return {
        "pmap_axis_index_n4": (jax.pmap(idx, axis_name="i"), [jax.ShapeDtypeStruct((4, 3, 5), F32)]),
        "pmap_psum_n8": (jax.pmap(lambda v: jax.lax.psum(jnp.exp(v), "i"), axis_name="i"),
                         [jax.ShapeDtypeStruct((8, 6), F32)]),
        "pmap_all_gather_n2": (jax.pmap(lambda v: jax.lax.all_gather(v, "i"), axis_name="i"),
                               [jax.ShapeDtypeStruct((2, 3, 2), F32)]),
    }


def _partitioned() -> dict:
    """jax.jit of sharded programs: XLA's SPMD partitioner writes the collectives."""
    m = mesh((4, "x"), (2, "y"))
    m4 = mesh((4, "d"))

    def mlp(x, w1, w2):
        return jnp.tanh(x @ w1) @ w2

    def attention(q, k, v):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)

    def train_step(w, x, y):
        loss = lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2)  # noqa: E731
        return w - 0.1 * jax.grad(loss)(w)

    return {
        "sharded_mlp_n8": (jax.jit(mlp, out_shardings=NamedSharding(m, P("x", None))),
                           [arg(m, (16, 8), P("x", None)), arg(m, (8, 32), P(None, "y")),
                            arg(m, (32, 8), P("y", None))]),
        "sharded_attention_n4": (jax.jit(attention),
                                 [arg(m4, (4, 8, 16), P("d")), arg(m4, (4, 8, 16), P("d")),
                                  arg(m4, (4, 8, 16), P("d"))]),
        "data_parallel_step_n4": (jax.jit(train_step, out_shardings=NamedSharding(m4, P())),
                                  [arg(m4, (8, 4), P()), arg(m4, (16, 8), P("d")), arg(m4, (16, 4), P("d"))]),
    }


def _odd_sizes() -> dict:
    """Groups of 3 and 6 devices and per-device pieces of odd sizes (3 x 5, 3 x 9, ...): nothing in
    the collectives' arithmetic may assume powers of two."""
    m3, m23 = mesh((3, "x")), mesh((2, "x"), (3, "y"))
    ring = [(0, 1), (1, 2), (2, 0)]
    return {
        "odd_all_gather_n3": (smap(m3, lambda a: jax.lax.all_gather(a, "x", axis=0, tiled=True), P("x"), P()),
                              [arg(m3, (9, 5), P("x"))]),
        "odd_psum_scatter_n3": (
            smap(m3, lambda a: jax.lax.psum_scatter(a, "x", scatter_dimension=0, tiled=True), P("x"), P("x")),
            [arg(m3, (27, 5), P("x"))]),
        "odd_all_to_all_n3": (smap(m3, lambda a: jax.lax.all_to_all(a, "x", 1, 0, tiled=True), P("x"), P("x")),
                              [arg(m3, (9, 9), P("x"))]),
        "odd_ppermute_ring_n3": (smap(m3, lambda a: jax.lax.ppermute(a, "x", ring), P("x"), P("x")),
                                 [arg(m3, (3, 7), P("x"))]),
        "mesh2x3_psum_y_n6": (smap(m23, lambda v: jax.lax.psum(v, "y"), P("x", "y"), P("x")),
                              [arg(m23, (4, 9), P("x", "y"))]),
        "mesh2x3_all_gather_x_n6": (
            smap(m23, lambda v: jax.lax.all_gather(v, "x", axis=0, tiled=True), P("x", "y"), P(None, "y")),
            [arg(m23, (6, 15), P("x", "y"))]),
    }


def programs() -> dict:
    return {**_collectives_1d(), **_collectives_2d(), **_pmaps(), **_partitioned(), **_odd_sizes()}


_METADATA = re.compile(r", metadata=\{[^{}]*\}")


def compiled_text(fn, args) -> str:
    """The per-device module XLA:CPU compiled, without source metadata (paths and line numbers
    of this script would change the files for nothing)."""
    text = fn.lower(*args).compile().as_text()
    text = _METADATA.sub("", text)
    lines, skip = [], False
    for line in text.splitlines():  # the FileNames / FunctionNames / ... tables jax appends
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            skip = True
            continue
        if skip and (line.startswith(("%", "ENTRY", "HloModule")) or not line.strip()):
            skip = False
        if not skip and (line.strip() or (lines and lines[-1].strip())):
            lines.append(line)
    return "\n".join(lines).strip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="only", default="", help="only modules whose name contains this")
    ap.add_argument("--list", action="store_true", help="print the module names and exit")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    opts = ap.parse_args(argv)
    progs = {k: v for k, v in programs().items() if opts.only in k}
    if opts.list:
        print("\n".join(progs))
        return 0
    differ = []
    for name, (fn, args) in progs.items():
        text, path = compiled_text(fn, args), HERE / f"{name}.hlo"
        if opts.check:
            if not path.exists() or path.read_text() != text:
                differ.append(name)
            continue
        path.write_text(text)
    if differ:
        print("differ from what the generator makes: " + ", ".join(differ), file=sys.stderr)
        return 1
    if not opts.check:
        print(f"wrote {len(progs)} modules to {HERE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
