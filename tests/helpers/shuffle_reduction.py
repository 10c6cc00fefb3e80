"""A kernel of the lowering tests and its numpy model, shared by the host lowering tests
(tests/unit/hlo_codegen/llvm/test_lowering.py) and the NVPTX ones (tests/unit/hlo_codegen/test_ptx.py,
test_ptx_gpu.py): per block, x*2 through shared memory, a warp-shuffle sum, warp sums through shared
memory again; `emulate` is the GPU's shfl.sync.down semantics written in numpy."""

from __future__ import annotations

import numpy as np

from hlo_codegen.indexing import parse_indexing_map
from hlo_codegen.kernel_ir import Buffer, FunctionBuilder, IRBuilder, Kernel

THREADS, BLOCKS = 64, 3


def reduction_kernel(etype: str = "f32", lanes_out: bool = True) -> Kernel:
    """Per block: x*2 through shared memory in reverse order, a warp shuffle sum, warp sums
    through shared memory again, thread 0 adds them. Writes every lane's shuffle result too
    (unless not `lanes_out`: then only lane 0, `th_x % 32 == 0`, reads it, as the emitters do)."""
    t = {"f32": "f32", "s32": "i32"}[etype]
    k = Kernel("block_sum", (BLOCKS, 1, 1), (THREADS, 1, 1))
    k.buffers += [Buffer("arg0", "param", etype, THREADS * BLOCKS),
                  Buffer("arg1", "param", etype, THREADS * BLOCKS, written=True),
                  Buffer("arg2", "param", etype, BLOCKS, written=True),
                  Buffer("tile", "shared", etype, THREADS), Buffer("warps", "shared", etype, THREADS // 32)]
    add = FunctionBuilder(k, "add", [t, t], [t], ["a", "b"])
    add.return_([add.binary("addf" if t == "f32" else "addi", *add.function.args)])
    b = IRBuilder(k)
    th, bl = b.thread_id("x", THREADS), b.block_id("x", BLOCKS)
    domain = f"th_x in [0, {THREADS - 1}], bl_x in [0, {BLOCKS - 1}]"
    flat = b.apply_indexing(parse_indexing_map(f"(th_x, bl_x) -> (bl_x * {THREADS} + th_x), domain: {domain}"),
                            [th, bl])[0]
    x = b.load("arg0", flat, t)
    two = b.constant(2.0 if t == "f32" else 2, t)
    b.store("tile", b.binary("mulf" if t == "f32" else "muli", x, two), th)
    b.sync_threads()
    on_th = f"domain: d0 in [0, {THREADS - 1}]"
    mirror = b.apply_indexing(parse_indexing_map(f"(d0) -> ({THREADS - 1} - d0), {on_th}"), [th])[0]
    (r,) = b.shuffle_reduce(add.function, [b.load("tile", mirror, t)])
    if lanes_out:
        b.store("arg1", r, flat)
        lane = b.apply_indexing(parse_indexing_map(f"(d0) -> (d0 mod 32), {on_th}"), [th])[0]
    else:
        lane = b.binary("remui", th, b.index(32))
    warp = b.apply_indexing(parse_indexing_map(f"(d0) -> (d0 floordiv 32), {on_th}"), [th])[0]
    b.if_(b.cmpi("eq", lane, b.index(0)), [], lambda: (b.store("warps", r, warp), [])[1])
    b.sync_threads()

    def total():
        s = b.load("warps", b.index(0), t)
        for w in range(1, THREADS // 32):
            s = b.binary("addf" if t == "f32" else "addi", s, b.load("warps", b.index(w), t))
        b.store("arg2", b.binary("addf" if t == "f32" else "addi", s, x), bl)  # x lives across 3 phases
        return []

    b.if_(b.cmpi("eq", th, b.index(0)), [], total)
    return k



def emulate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """numpy model of the kernel with shfl.sync.down(d): lane i reads lane i+d if i+d < 32."""
    lanes = (x.reshape(BLOCKS, THREADS) * x.dtype.type(2))[:, ::-1].reshape(BLOCKS, THREADS // 32, 32).copy()
    d = 16
    while d:
        other = lanes.copy()
        other[:, :, :32 - d] = lanes[:, :, d:]
        lanes = lanes + other
        d //= 2
    per_lane = lanes.reshape(-1)
    totals = lanes[:, :, 0].sum(axis=1, dtype=x.dtype) + x.reshape(BLOCKS, THREADS)[:, 0]
    return per_lane, totals
