"""Prefetching the next block's part of an input in a host kernel (host.py).

A row reduction (softmax, layer norm) reads its block's row in its first phase, the row's first
touch, and then computes on it from the L1 cache in the phases after: the max and the division
of the bf16 softmax over [4096, 1024] took 17% and 14% of the kernel with its 8 MiB input in
the last-level cache, against 5% and 7% with the input in L2. The hardware prefetcher did not
hide the first touch. So where block b's first phase reads one contiguous range of an input,
[first + b * stride, + length), the block asks for block b + 1's range (`llvm.prefetch` into
L2, one request a 64-byte line) once its own first phase is done: the lines then arrive while
the block computes.

When: an input under STREAM_MIN_BYTES (it may be in the last-level cache), or any input of a
kernel whose later phases compute long math (exp, tanh, ...: bound by its arithmetic, so the
memory system has time to spare). A layer norm of a 16 MiB input, whose later phases are a few
adds and multiplies, already runs at the memory's speed; there the extra requests only competed
with the block's own reads and its streamed stores (2.90 -> 3.23-3.39 ms on two threads), so it
is left alone. Modules, old and new code alternating in one process, two AVX2 cores (Zen 3):
softmax bf16 [4096, 1024] 5.84 -> 5.14 ms, f32 5.78 -> 4.61, f32 [16384, 1024] (64 MiB) 31.44
-> 26.77; layer norm f32 [1024, 1024] 1.33 -> 1.01, [2048, 1024] 2.04 -> 1.81; the transformer
layer 41.49 -> 39.61. A prefetch is a hint: it changes no result, and an address past the input
(the last block's next) is never read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_codegen.kernel_ir.ir import Kernel, Op, hlo_bits
from hlo_codegen.llvm.host_stream import STREAM_MIN_BYTES, Unknown, block_indices

LINE = 64  # bytes a prefetch asks for (a cache line)
MIN_RANGE_BYTES = 4 * LINE  # a block's part below this is left to the hardware prefetcher
MAX_RANGE_BYTES = 64 << 10  # and above this it would not stay in L2 until the next block runs


@dataclass(frozen=True)
class PrefetchedInput:
    """Block b's first phase reads elements [first + b * stride, + length) of `buffer`."""

    buffer: str
    first: int
    stride: int
    length: int
    esize: int

    @property
    def lines(self) -> int:
        """Prefetches a block issues: its range's bytes in lines, plus one for a range that does
        not start on a line."""
        return -(-self.length * self.esize // LINE) + 1


def _sample_blocks(total: int) -> np.ndarray:
    """The blocks whose reads are checked: the first three, one in the middle, the last."""
    return np.unique(np.array([0, 1, 2, total // 2, total - 1], np.int64).clip(0, total - 1))


def _affine_range(kernel: Kernel, loads: list[Op], defs: dict[int, Op]) -> tuple[int, int, int] | None:
    """(first, stride, length) when each sampled block b reads every element of [first + b *
    stride, + length) and nothing else."""
    total = kernel.grid[0] * kernel.grid[1] * kernel.grid[2]
    blocks = _sample_blocks(total)
    idx = block_indices(kernel, loads, defs, blocks)
    lo, hi = idx.min(axis=1), idx.max(axis=1)
    first, length = int(lo[0]), int(hi[0] - lo[0]) + 1
    stride = int(lo[1] - lo[0])
    if length > idx.shape[1]:
        return None  # fewer reads than the span: holes (and no span-sized array to check it)
    if stride < length or np.any(lo != first + stride * blocks) or np.any(hi - lo + 1 != length):
        return None  # overlapping ranges (the next block's are read already), or not affine
    local = idx - lo[:, None]
    hits = np.zeros((blocks.size, length), bool)
    hits[np.arange(blocks.size)[:, None], local] = True
    return (first, stride, length) if hits.all() else None


def prefetched_inputs(kernel: Kernel, phases: list[list[Op]],
                      heavy_later: bool = False) -> list[PrefetchedInput]:
    """The inputs whose next-block range `kernel` prefetches after its first phase (see the
    module docstring); `heavy_later`: a later phase computes long math, which lifts the size
    rule."""
    total = kernel.grid[0] * kernel.grid[1] * kernel.grid[2]
    if len(phases) < 2 or total < 3 or phases[0][0].name == "shuffle_reduce":
        return []
    defs = {id(r): o for o in kernel.body.walk() for r in o.results}
    found = []
    for buf in kernel.params:
        esize = hlo_bits(buf.hlo_type) // 8
        large = buf.num_elements * esize >= STREAM_MIN_BYTES
        if buf.written or buf.packed or esize == 0 or large and not heavy_later:
            continue
        loads = [o for o in phases[0] if o.name == "load" and o.attrs.get("buffer") == buf.name]
        if not loads:
            continue
        try:
            found_range = _affine_range(kernel, loads, defs)
        except Unknown:
            continue
        if found_range is not None and MIN_RANGE_BYTES <= found_range[2] * esize <= MAX_RANGE_BYTES:
            found.append(PrefetchedInput(buf.name, *found_range, esize))
    return found
