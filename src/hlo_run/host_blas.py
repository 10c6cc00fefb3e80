"""The host's own f32 BLAS: a JIT-compiled GEMM and direct convolution (hlo-run's host platform).

Where it sits: `backends/host.py` runs GemmThunks through `sgemm` and convolutions through
`host_conv`, which calls `conv_channels_last`. The kernels are host_blas_ir's, compiled once per
process by `host_kernel` for the host CPU; Python only hands the JIT's pack the blocks of B (the
weights) to lay out in NR-column panels and splits C into units of 96 rows x a group of panels
over the host threads: the native team of `host_team` runs the module's job functions
(`host_blas_jobs`), `host_kernel.run_ranges` the same in Python where the team cannot (a GEMM
with an epilogue written in Python runs there too). Where the JIT packs B by rows, the units pack
B's panel groups as they reach them (`_lazy_pack`), so packing overlaps multiplying instead of
taking a pass of its own. `round_bf16` is the JIT's f32 -> bf16 rounding (GEMM fusions' bf16
epilogues, `host_gemm_direct`).

Why not numpy's BLAS: numpy's OpenBLAS ran the bench set's shapes at about half of XLA:CPU's
speed on one core (a [2048,512] x [512,2048] product: 34 ms of CPU against XLA's 19 ms; a
3x3 convolution through im2col 7.9 ms against 3.7 ms), where this microkernel runs 230-260
GFLOPS a core with AVX-512 (2026-11-29; about 280 on operands in cache). A result's summation
order is fixed by the shapes (K blocks of KC, then k ascending, one fused multiply-add each),
never by the thread count.

    sgemm(a, b, out)                     # out[m, n] = a[m, k] @ b[k, n], float32
    sgemm_batched(a, b, out, alpha=s, bias=v, epilogue=fn)   # stacks, scale, bias, a block hook
    conv_channels_last(x, w, strides, dilations, out)
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import threading
from typing import Callable, NamedTuple

import numpy as np

from hlo_run.host_blas_ir import KC, ROW_TILES, blas_module, tile
from hlo_run.host_blas_pack_ir import PACK_GROUP_PANELS

UNITS_PER_THREAD = 4  # a GEMM is split into at least this many units (row chunk x panel group) a thread
_I64 = ctypes.c_int64
_P = ctypes.c_void_p
_GEMM = ctypes.CFUNCTYPE(None, _P, _I64, _P, _I64, _P, _I64, _I64, _I64, ctypes.c_float, _P, ctypes.c_bool,
                         _P)
_GEMM_PACKING = ctypes.CFUNCTYPE(None, _P, _I64, _P, _I64, _P, _I64, _I64, _I64, ctypes.c_float, _P,
                                 ctypes.c_bool, _P, _P, _I64, _I64)
_ROUND = ctypes.CFUNCTYPE(None, _P, _P, _I64)
_WIDEN = ctypes.CFUNCTYPE(None, _P, _I64, _I64, _I64, _P, _I64)


class _Blas(NamedTuple):
    """The compiled module's functions (host_blas_ir) and the tile they were built for."""
    mr: int
    nr: int
    gemm: Callable
    compiled: object
    round_bf16: Callable
    widen_rows: Callable
    units_job: int  # the addresses of the job functions (hlo_run.host_team runs them)
    pack_job: int
    pack_t_job: int
    conv_job: int
    gemm_packing: Callable  # `@gemm_packing`: `gemm`, packing B's panel groups on first use


@functools.lru_cache(maxsize=None)
def _kernels() -> _Blas:
    """The host BLAS for this CPU (its vector width picks the tile), compiled once."""
    from hlo_run.host_kernel import compile_host_module, has_avx512

    mr, nr = tile(has_avx512())
    compiled = compile_host_module(blas_module(mr, nr), 2)

    def fn(kind, name: str):
        return kind(compiled.engine.get_function_address(name))

    return _Blas(mr, nr, fn(_GEMM, "gemm"), compiled, fn(_ROUND, "round_bf16"), fn(_WIDEN, "widen_rows"),
                 *(compiled.engine.get_function_address(job)
                   for job in ("units_job", "pack_job", "pack_t_job", "conv_job")),
                 fn(_GEMM_PACKING, "gemm_packing"))


def _threads(work: int) -> int:
    from hlo_run.host_kernel import threads_for

    return threads_for(work)


def pack_panels(b: np.ndarray, nr: int, kc: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """B [k, n] as the microkernel reads it: per K block of kc rows (all of k when None), the
    NR-column panels one after another, each kc x nr floats (columns past n are zeros). One copy
    pass when n is a multiple of nr (the padded copy only otherwise); into `out` when given."""
    k, n = b.shape
    npan = -(-n // nr)
    if n % nr:
        padded = np.zeros((k, npan * nr), np.float32)
        padded[:, :n] = b
        b = padded
    kc = kc or max(k, 1)
    out = np.empty(k * npan * nr, np.float32) if out is None else out
    for k0 in range(0, k, kc):
        rows = min(kc, k - k0)
        block = out[k0 * npan * nr:(k0 + rows) * npan * nr].reshape(npan, rows, nr)
        block[...] = b[k0:k0 + rows].reshape(rows, npan, nr).transpose(1, 0, 2)
    return out


def _lazy_pack(b: np.ndarray, nr: int, per: int) -> tuple[np.ndarray, np.ndarray, tuple] | None:
    """B's packing left to the GEMM's units (`@ensure_packed`: a panel group as a unit first needs
    it) where the JIT's `@pack` lays it out (rows of f32 or bf16, n a multiple of nr): (the packed
    stack, to be filled; the context words; arrays to keep alive); None where `_pack_all` packs
    B first. A pass over all of B before the units, bound by memory on every core at once, was
    7.5% of the transformer layer on two AVX2 cores (2.7 of 35.9 ms: 13 MiB of B, weights from
    memory)."""
    (k, n), nb = b.shape[-2:], math.prod(b.shape[:-2])
    size = b.dtype.itemsize
    if not _rows_readable(b, bf16=True) or n % nr or k < 1:
        return None
    npan = n // nr
    groups = -(-npan // PACK_GROUP_PANELS)
    bp, table = np.empty(nb * per, np.float32), np.asarray(_bases(b), np.int64)
    flags = np.zeros(nb * groups, np.int32)
    ctx = np.array([table.ctypes.data, size, b.strides[-2] // size, k, npan, bp.ctypes.data, per,
                    int(size == 2), flags.ctypes.data, PACK_GROUP_PANELS, groups], np.int64)
    return bp, ctx, (table, flags)


def _pack_all(b: np.ndarray, nr: int, per: int, threads: int) -> np.ndarray:
    """Every matrix of the stack b [batch..., k, n] (any strides) packed (`pack_panels`: NR-column
    panels of all k rows), one after another (`per` floats each). Where B's rows are contiguous
    and n a multiple of nr, blocks of KC rows are copied by the JIT's `pack` (vector loads and
    stores; numpy's strided copy ran at a third of that) on the host threads; otherwise numpy
    packs them."""
    (k, n), nb = b.shape[-2:], math.prod(b.shape[:-2])
    bp = np.empty(nb * per, np.float32)
    blocks = -(-k // KC)
    size = b.dtype.itemsize
    if size == 2 and (n % nr or not _rows_readable(b, bf16=True)):  # only rows of bf16 are packed as such
        b, size = b.astype(np.float32), 4
    if size == 4 and b.strides[-2] == 4 and b.strides[-1] % 4 == 0 and b.strides[-1] > 0 and k > 1:
        _pack_columns(b, nr, per, threads, bp)
        return bp
    if n % nr or b.strides[-1] != 4 or b.strides[-2] % 4 or b.strides[-2] < 0:
        for i, index in enumerate(np.ndindex(*b.shape[:-2])):
            pack_panels(b[index], nr, None, bp[i * per:(i + 1) * per])
        return bp
    npan, ldb, table = n // nr, b.strides[-2] // size, np.asarray(_bases(b), np.int64)
    _run_job("packing the host GEMM's B", _kernels().pack_job,
             [table.ctypes.data, size, ldb, k, npan, bp.ctypes.data, per, int(size == 2)], nb * blocks,
             threads if k * n * nb >= 1 << 16 else 1)
    return bp


def _run_job(what: str, job: int, words: list[int], total: int, threads: int) -> None:
    """Ranges of [0, total) of the JIT's `job` (a `host_blas_jobs` function, its arguments `words`) on
    the host threads (`host_kernel.run_function`)."""
    from hlo_run.host_kernel import run_function

    ctx = np.array(words, np.int64)
    run_function(what, job, ctx.ctypes.data, total, threads)


def _pack_columns(b: np.ndarray, nr: int, per: int, threads: int, bp: np.ndarray) -> None:
    """`_pack_all` for a stack whose columns are contiguous (b = K^T, an attention product's
    transposed operand): the JIT's `pack_t`, one matrix a range (the transformer layer's 16 keys
    matrices: 0.13 -> 0.09 ms hot, where numpy's strided copy went matrix by matrix)."""
    (k, n), nb = b.shape[-2:], math.prod(b.shape[:-2])
    table = np.asarray(_bases(b), np.int64)
    _run_job("packing the host GEMM's B", _kernels().pack_t_job,
             [table.ctypes.data, b.strides[-1] // 4, k, n, bp.ctypes.data, per], nb,
             threads if k * n * nb >= 1 << 16 else 1)


def _rows_readable(x: np.ndarray, bf16: bool = False) -> bool:
    """A float32 (or, with `bf16`, also bfloat16) matrix or stack of them whose rows are whole
    elements apart and whose columns are adjacent."""
    size = x.dtype.itemsize
    from hlo_common.interpreter import narrow

    return (x.dtype == np.float32 or bf16 and x.dtype == narrow.BF16) and x.strides[-1] == size \
        and all(s % size == 0 and s >= 0 for s in x.strides)


def _bases(x: np.ndarray) -> list[int]:
    """The address of each matrix of the stack x [batch..., rows, cols], batch index row-major (any
    batch strides: a transposed view's matrices need no copy)."""
    bases = [x.ctypes.data]
    for extent, stride in zip(x.shape[:-2], x.strides[:-2]):
        bases = [base + i * stride for base in bases for i in range(extent)]
    return bases


def sgemm(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int | None = None) -> None:
    """out = a @ b for float32 matrices a [m, k], b [k, n], out [m, n] (out may be a strided view)."""
    if a.ndim != 2 or b.ndim != 2 or out.ndim != 2:
        raise ValueError(f"sgemm: shapes {a.shape} x {b.shape} -> {out.shape} are not matrices")
    sgemm_batched(a[None], b[None], out[None], threads)


def sgemm_batched(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int | None = None,
                  epilogue: Callable[..., None] | None = None, alpha: float = 1.0,
                  bias: np.ndarray | None = None) -> None:
    """out[i] = (a[i] @ b[i]) * alpha + bias for float32 stacks a [batch..., m, k], b [batch...,
    k, n], out [batch..., m, n] (batch index i row-major; bias: n floats, or None; alpha and bias
    are applied to each finished sum as a GEMM fusion's multiply and add round). a and b may
    also be bfloat16: their values are widened exactly as they are read (B as it is packed, A's
    rows per unit), the product that of the f32 values, without an f32 copy of either. The work is
    split into MR-row tiles of every matrix, all of them over the host threads at once (a batch
    of small products keeps both cores busy; a single product is split evenly to a tile).
    `epilogue(i, r0, r1, rows)`, when given, runs on the thread that finished rows [r0, r1) of
    out[i], right after them, with their sums in `rows` (rows x n floats in that thread's own
    buffer, in L2): a GEMM fusion's elementwise epilogue, which writes `out` itself (the GEMM
    does not), so a fusion whose output is not the f32 sums never stores them (16 MiB on the
    bench's bf16 MLP block)."""
    batch, (m, k), n = a.shape[:-2], a.shape[-2:], b.shape[-1]
    nb = math.prod(batch)
    if a.ndim < 3 or b.shape != (*batch, k, n) or out.shape != (*batch, m, n) or \
            (bias is not None and bias.shape != (n,)):
        raise ValueError(f"sgemm: shapes {a.shape} x {b.shape} -> {out.shape} do not match")
    if nb == 0 or m == 0 or n == 0:
        return
    bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
    if k == 0 or not _rows_readable(out):
        _gemm_elsewhere(a, b, out, threads, alpha, bias)
        sums = out.reshape(nb, m, n)
        for i in range(nb if epilogue else 0):
            epilogue(i, 0, m, sums[i])
        return
    a = a if _rows_readable(a, bf16=True) else np.ascontiguousarray(a, np.float32)
    mr, nr = _kernels()[:2]
    threads = threads if threads is not None else _threads(4 * nb * (m * k + k * n + m * n))
    per = k * -(-n // nr) * nr
    lazy = _lazy_pack(b, nr, per)
    bp = lazy[0] if lazy else _pack_all(b, nr, per, threads)
    chunks = -(-m // (mr * ROW_TILES))  # row chunks of a matrix: ROW_TILES tiles (A's rows stay in L2)
    wanted = 1 if epilogue else -(-threads * UNITS_PER_THREAD // (nb * chunks))
    step, groups = _panel_groups(-(-n // nr), wanted, PACK_GROUP_PANELS if lazy else 1)
    split = _Split(a, bp, out, bias, k, n, mr * ROW_TILES, chunks, step * nr, groups, lazy)
    _run_split(split, out, m, alpha, epilogue, threads)


def _run_split(split: _Split, out: np.ndarray, m: int, alpha: float, epilogue, threads: int) -> None:
    """The units of `split` over the host threads: the JIT's `@units_job` on the native team for an
    f32 A without an epilogue, else `_Split.run`'s Python loop."""
    from hlo_run.host_kernel import run_ranges

    nt = epilogue is None and _streams(out, split.ldc, split.pcs)
    if epilogue is None and split.asize == 4:
        pas, pcs = np.asarray(split.pas, np.int64), np.asarray(split.pcs, np.int64)
        _run_job("the host GEMM", _kernels().units_job,
                 [pas.ctypes.data, pcs.ctypes.data, split.pb, split.per, split.pbias or 0, split.lda,
                  split.ldc, split.k, m, split.n, split.rows, split.cols, split.chunks, split.groups,
                  int(np.float32(alpha).view(np.uint32)), int(nt), split.lazy], split.units, threads)
        return

    def run_split(lo: int, hi: int) -> None:
        split.run(lo, hi, m, alpha, epilogue, nt)

    run_ranges("the host GEMM", run_split, split.units, threads)


class _Split:
    """A product split into units (matrix i, row chunk, column group; groups fastest) and what each
    unit reads and writes (the JIT's `@units_job` decodes the same), `run` for units that widen a bf16
    A's rows first (into the thread's own block, in L2, where widening all of A first wrote and
    read an f32 copy: 16 MiB on the bf16 MLP block) or hand their sums to an epilogue."""

    def __init__(self, a, bp, out, bias, k, n, rows, chunks, cols, groups, lazy=None):
        self.asize, self.k, self.n = a.dtype.itemsize, k, n
        self.rows, self.chunks, self.cols, self.groups = rows, chunks, cols, groups
        self.pas, self.pcs, self.pb = _bases(a), _bases(out), bp.ctypes.data
        self.units, self.per = len(self.pas) * chunks * groups, bp.size // len(self.pas)
        self.lda, self.ldc = a.strides[-2] // self.asize, out.strides[-2] // 4
        self.pbias = None if bias is None else bias.ctypes.data
        self.lazy = lazy[1].ctypes.data if lazy else 0  # B's `@ensure_packed` context (0: packed)
        self.keep = (bp, bias, lazy)  # alive while the units run

    def run(self, lo: int, hi: int, m: int, alpha: float, epilogue, nt: bool) -> None:
        """Units [lo, hi) on this thread (with an epilogue, groups is 1: a unit is whole rows)."""
        blas, k, n = _kernels(), self.k, self.n
        sums = _thread_rows("c", self.rows * n) if epilogue else None
        wide = _thread_rows("a", self.rows * k) if self.asize == 2 else None
        for u in range(lo, hi):
            i, rest = divmod(u, self.chunks * self.groups)
            chunk, g = divmod(rest, self.groups)
            r0, r1 = chunk * self.rows, min(m, (chunk + 1) * self.rows)
            j0, j1 = g * self.cols, min(n, (g + 1) * self.cols)
            pa, lda = self.pas[i] + self.asize * r0 * self.lda, self.lda
            if wide is not None:
                blas.widen_rows(pa, lda, r1 - r0, k, wide.ctypes.data, k)
                pa, lda = wide.ctypes.data, k
            if epilogue:
                pc, ldc = sums.ctypes.data + 4 * j0, n
            else:
                pc, ldc = self.pcs[i] + 4 * (r0 * self.ldc + j0), self.ldc
            blas.gemm_packing(pa, lda, self.pb + 4 * (i * self.per + j0 * k), k, pc, ldc, r1 - r0, j1 - j0,
                              alpha, self.pbias and self.pbias + 4 * j0, nt, _tile(blas.mr, blas.nr),
                              self.lazy or None, i, j0)
            if epilogue:
                epilogue(i, r0, r1, sums[:(r1 - r0) * n].reshape(r1 - r0, n))


def _streams(out: np.ndarray, ldc: int, pcs: list[int]) -> bool:
    """Whether the GEMM stores `out` (its matrices at `pcs`) with streaming stores: a product of at
    least half the last-level cache (each sum is stored once: the K blocks before the last sum in
    the thread's tile) whose rows start on 64-byte lines. Such an output would not stay in cache
    anyway, and a plain store first reads each line from memory: the bench's MLP block writes a
    16 MiB product (10.6 -> 9.3-9.8 ms for that GEMM). Its consumer then reads it from memory (the
    MLP's GELU is bound by its arithmetic, not by that read)."""
    return out.nbytes >= _last_level_cache() // 2 and ldc % 16 == 0 \
        and all(base % 64 == 0 for base in pcs)


@functools.lru_cache(maxsize=None)
def _last_level_cache() -> int:
    """The bytes of this CPU's largest cache (Linux's sysfs), or 32 MiB when it is not known."""
    sizes = []
    for index in range(8):
        try:
            text = open(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size").read().strip()
        except OSError:
            break
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        if text.rstrip("KMG").isdigit():
            sizes.append(int(text.rstrip("KMG")) * unit)
    return max(sizes, default=32 << 20)


_local = threading.local()


def _tile(mr: int, nr: int) -> int:
    """The address of this thread's tile of K-block sums (`@gemm`'s acc: a unit's rows x NR)."""
    return _thread_rows("acc", mr * ROW_TILES * nr).ctypes.data


def _thread_rows(which: str, size: int) -> np.ndarray:
    """This thread's scratch `which` of at least `size` floats (kept for the next GEMM: a fresh one
    would cost the page faults of its first touch)."""
    rows = getattr(_local, which, None)
    if rows is None or rows.size < size:
        rows = np.empty(size, np.float32)
        setattr(_local, which, rows)
    return rows


def _gemm_elsewhere(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int | None, alpha: float,
                    bias: np.ndarray | None) -> None:
    """sgemm_batched's result where it cannot be computed in `out` itself: k == 0 (each sum is 0,
    then scaled and biased as the store would), or rows the microkernel cannot write (a copy)."""
    if a.shape[-1] == 0:
        out[...] = 0
        if alpha != 1:
            out *= np.float32(alpha)
        if bias is not None:
            out += bias
        return
    target = np.empty(out.shape, np.float32)
    sgemm_batched(a, b, target, threads, alpha=alpha, bias=bias)
    out[...] = target


def _panel_groups(npan: int, wanted: int, multiple: int = 1) -> tuple[int, int]:
    """(panels a group, groups): C's NR-column panels in about `wanted` groups (at least one), so
    that a product of few row chunks still has units for every thread (the tail of a thread's
    last unit is what the others wait for); an epilogue asks for one, as it takes whole rows. A
    group is a multiple of `multiple` panels (B's lazily packed groups) unless it is all of them."""
    groups = max(1, min(npan, wanted))
    step = -(-npan // groups)
    step = min(npan, -(-step // multiple) * multiple)
    return step, -(-npan // step)


def conv_channels_last(x: np.ndarray, w: np.ndarray, strides: tuple[int, ...], dilations: tuple[int, ...],
                       out: np.ndarray, threads: int | None = None) -> None:
    """A direct convolution of the padded (and base-dilated) input x [N, S..., C] with the kernel
    w [K..., C, O] (window strides and dilations per spatial dim) into out [N, S'..., O]: float32,
    C-contiguous. The microkernel's MR rows are output pixels along the last spatial dim, or along
    the batch where that fills the tiles better (a weight gradient: 3 output columns, 64 "images");
    each output row (the other indices) is one range of the host threads."""
    nsp = x.ndim - 2
    spans = [(k - 1) * d + 1 for k, d in zip(w.shape[:nsp], dilations)]
    want = (x.shape[0], *(max(0, (s - span) // st + 1) for s, span, st in zip(x.shape[1:-1], spans, strides)),
            w.shape[-1])
    contiguous = x.flags.c_contiguous and out.flags.c_contiguous
    if w.shape[-2] != x.shape[-1] or out.shape != want or not contiguous:
        raise ValueError(f"conv: shapes {x.shape} * {w.shape} -> {out.shape} do not match (or are strided)")
    if nsp == 0:  # no spatial dims: one output pixel per image
        x, w, out = x[:, None], w[None], out[:, None]
        strides, dilations, nsp = (1,), (1,), 1
    if out.size == 0:
        return
    if x.shape[-1] == 0:
        out[...] = 0
        return
    mr, nr = _kernels()[:2]
    xs = [st // 4 for st in x.strides]  # element strides of [N, S..., C]
    taps, cin = _taps(w.shape[:nsp], dilations, xs, x.shape[-1])
    o, n, wo = w.shape[-1], out.shape[0], out.shape[-2]
    by_batch = n > 1 and _tile_use(n, mr) > _tile_use(wo, mr)
    # rows: every output index but the tiled one (its base offset into x); lda: the tiled one's step
    if by_batch:
        row_dims, lda, ldc, rowstride, tiled = nsp, xs[0], out.strides[0] // 4, o, n
    else:
        row_dims, lda, ldc, rowstride, tiled = nsp - 1, strides[-1] * xs[-2], o, wo * o, wo
    rows = np.zeros(1, np.int64)  # the base offsets of the rows' spatial indices, last index fastest
    for d in range(row_dims):
        step = np.arange(out.shape[1 + d], dtype=np.int64) * (strides[d] * xs[1 + d])
        rows = (rows[:, None] + step[None, :]).reshape(-1)
    if not by_batch:
        rows = (np.arange(n, dtype=np.int64)[:, None] * xs[0] + rows[None, :]).reshape(-1)
    rows = np.ascontiguousarray(rows, np.int64)
    bp = pack_panels(w.reshape(-1, o), nr)
    px, pt, pr, pb, po = x.ctypes.data, taps.ctypes.data, rows.ctypes.data, bp.ctypes.data, out.ctypes.data

    _run_job("the host convolution", _kernels().conv_job,
             [px, lda, pt, len(taps), cin, pr, tiled, pb, po, ldc, rowstride, o], len(rows),
             threads if threads is not None else _threads(x.nbytes + out.nbytes))


def round_bf16(x: np.ndarray) -> np.ndarray:
    """The float32 array x rounded to bfloat16 (a new C-contiguous array of x's shape): the same
    bits as `x.astype(ml_dtypes.bfloat16)`, about three times faster (the JIT's `round_bf16`)."""
    import ml_dtypes

    src = np.ascontiguousarray(x, np.float32)
    out = np.empty(x.shape, ml_dtypes.bfloat16)
    flat_src, flat_out = src.reshape(-1), out.reshape(-1)
    bulk = src.size - src.size % 16
    if bulk:
        _kernels().round_bf16(flat_src.ctypes.data, flat_out.ctypes.data, bulk)
    with np.errstate(invalid="ignore"):  # a NaN tail: ml_dtypes warns on NaN casts
        flat_out[bulk:] = flat_src[bulk:].astype(ml_dtypes.bfloat16)
    return out


def _tile_use(extent: int, mr: int) -> float:
    """The share of the microkernel's MR-row tiles that holds real rows, over `extent` rows."""
    return extent / (-(-extent // mr) * mr)


def _taps(kernel: tuple[int, ...], dilations: tuple[int, ...], xs: list[int],
          c: int) -> tuple[np.ndarray, int]:
    """(the window's offsets into x, the contiguous floats read at each): where the last spatial dim
    is not dilated its taps are adjacent runs of c floats, so they merge into one of k * c (a 3x3
    kernel: 3 taps of 3c, a longer inner loop; the packed kernel's rows are in the same order)."""
    nsp = len(kernel)
    merged = dilations[-1] == 1
    outer = kernel[:-1] if merged else kernel
    taps = np.array([sum(t * d * xs[1 + i] for i, (t, d) in enumerate(zip(tap, dilations)))
                     for tap in itertools.product(*(range(k) for k in outer))] or [0], np.int64)
    return taps, (kernel[-1] * c if merged else c) if nsp else c
