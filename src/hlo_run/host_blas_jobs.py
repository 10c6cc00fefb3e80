"""The host team's entry points into the host BLAS module (hlo_run.host_blas_ir): each job function
`@name(ptr ctx, i64 lo, i64 hi)` runs one of the module's functions over a range of its units, the
other arguments read from ctx, as hlo_run.host_team calls every function it runs (a host kernel
takes its arguments the same way). host_blas fills ctx and falls back to calling the functions
from Python over `host_kernel.run_ranges` where the team cannot run.
"""

from __future__ import annotations

from hlo_run.host_blas_ir import KC, ROW_TILES


def ctx_words(n: int) -> list[str]:
    """%w0 .. %w{n-1}: the job's n argument words at %ctx."""
    return [line for i in range(n) for line in (f"  %w{i}p = getelementptr i64, ptr %ctx, i64 {i}",
                                                 f"  %w{i} = load i64, ptr %w{i}p")]


_UNIT_DECODE = [  # unit u's matrix, rows and columns, and the A and C rows it starts at
    "  %cg = mul i64 %w12, %w13", "  %i = udiv i64 %u, %cg", "  %rest = urem i64 %u, %cg",
    "  %chunk = udiv i64 %rest, %w13", "  %g = urem i64 %rest, %w13",
    "  %r0 = mul i64 %chunk, %w10", "  %j0 = mul i64 %g, %w11",
    "  %pap = getelementptr i64, ptr %pas, i64 %i", "  %pa = load i64, ptr %pap",
    "  %pcp = getelementptr i64, ptr %pcs, i64 %i", "  %pc = load i64, ptr %pcp",
    "  %abase = inttoptr i64 %pa to ptr", "  %ao = mul i64 %r0, %w5",
    "  %ap = getelementptr float, ptr %abase, i64 %ao",
    "  %bo0 = mul i64 %i, %w3", "  %co0 = mul i64 %r0, %w6", "  %cbase = inttoptr i64 %pc to ptr",
    "  %rend0 = add i64 %r0, %w10", "  %rlong = icmp sgt i64 %rend0, %w8",
    "  %rend = select i1 %rlong, i64 %w8, i64 %rend0", "  %rows = sub i64 %rend, %r0",
    "  %cend0 = add i64 %j0, %w11", "  %clong = icmp sgt i64 %cend0, %w9",
    "  %cend = select i1 %clong, i64 %w9, i64 %cend0",
]


def units_job(mr: int, nr: int) -> list[str]:
    """`@units_job(ctx, lo, hi)`: `@gemm` on units [lo, hi) of a split product (hlo_run.host_blas's
    `_Split`: unit u is matrix u / (chunks groups), row chunk (u / groups) % chunks, column group u
    % groups), ctx 17 words: the matrices' A and C addresses (two tables), packed B, floats a
    packed matrix, bias (0: none), lda, ldc, k, m, n, rows and columns a unit, chunks, groups,
    alpha's bits, nt, and B's `@ensure_packed` context (0: B is packed already), for
    `@gemm_packing`; the K blocks' tile on this thread's stack. Python built a table of the units'
    addresses before (~30 us a GEMM)."""
    words = ctx_words(17)
    return [
        "define void @units_job(ptr %ctx, i64 %lo, i64 %hi) {", "entry:",
        f"  %acc = alloca [{mr * ROW_TILES * nr} x float], align 64", *words,
        "  %pas = inttoptr i64 %w0 to ptr", "  %pcs = inttoptr i64 %w1 to ptr",
        "  %pb = inttoptr i64 %w2 to ptr", "  %bias = inttoptr i64 %w4 to ptr",
        "  %hasbias = icmp ne i64 %w4, 0",
        "  %ab = trunc i64 %w14 to i32", "  %alpha = bitcast i32 %ab to float",
        "  %nt = trunc i64 %w15 to i1", "  %lz = inttoptr i64 %w16 to ptr",
        "  %any = icmp slt i64 %lo, %hi", "  br i1 %any, label %loop, label %done",
        "loop:", "  %u = phi i64 [%lo, %entry], [%u1, %loop]", *_UNIT_DECODE,
        "  %cols = sub i64 %cend, %j0", "  %bo1 = mul i64 %j0, %w7", "  %bo = add i64 %bo0, %bo1",
        "  %bp = getelementptr float, ptr %pb, i64 %bo", "  %co = add i64 %co0, %j0",
        "  %cp = getelementptr float, ptr %cbase, i64 %co", "  %bj = getelementptr float, ptr %bias, i64 %j0",
        "  %bu = select i1 %hasbias, ptr %bj, ptr null",
        "  call void @gemm_packing(ptr %ap, i64 %w5, ptr %bp, i64 %w7, ptr %cp, i64 %w6, i64 %rows, "
        "i64 %cols, float %alpha, ptr %bu, i1 %nt, ptr %acc, ptr %lz, i64 %i, i64 %j0)",
        "  %u1 = add i64 %u, 1", "  %more = icmp slt i64 %u1, %hi", "  br i1 %more, label %loop, label %done",
        "done:", "  ret void", "}",
    ]


def gemm_packing(nr: int) -> list[str]:
    """`@gemm_packing(a, lda, bp, k, c, ldc, m, n, alpha, bias, nt, acc, lz, i, j0)`: `@gemm` on
    columns [j0, j0 + n) of matrix i (bp, c and bias already at column j0), where lz (not null)
    is B's `@ensure_packed` context: then a packed panel group at a time, each after
    `@ensure_packed` (j0 is a group's first column). The GEMM's units call it, native or from
    Python."""
    from hlo_run.host_blas_pack_ir import PACK_GROUP_PANELS

    gc = PACK_GROUP_PANELS * nr  # columns a lazily packed panel group
    args = ("ptr %a, i64 %lda, ptr %bp, i64 %k, ptr %c, i64 %ldc, i64 %m, i64 %n, float %alpha, "
            "ptr %bias, i1 %nt")
    return [
        f"define void @gemm_packing({args}, ptr %acc, ptr %lz, i64 %i, i64 %j0) {{", "entry:",
        "  %lazy = icmp ne ptr %lz, null", "  %hasbias = icmp ne ptr %bias, null",
        "  br i1 %lazy, label %group, label %whole",
        "whole:", "  call void @gemm(ptr %a, i64 %lda, ptr %bp, i64 %k, ptr %c, i64 %ldc, i64 %m, i64 %n, "
        "float %alpha, ptr %bias, i1 %nt, ptr %acc)", "  ret void",
        "group:", "  %d = phi i64 [0, %entry], [%d1, %group]", "  %col = add i64 %j0, %d",
        f"  %pg = udiv i64 %col, {gc}", "  call void @ensure_packed(ptr %lz, i64 %i, i64 %pg)",
        "  %left = sub i64 %n, %d", f"  %short = icmp slt i64 %left, {gc}",
        f"  %w = select i1 %short, i64 %left, i64 {gc}",
        "  %bo = mul i64 %d, %k", "  %bpd = getelementptr float, ptr %bp, i64 %bo",
        "  %cd = getelementptr float, ptr %c, i64 %d", "  %bd = getelementptr float, ptr %bias, i64 %d",
        "  %bu = select i1 %hasbias, ptr %bd, ptr null",
        "  call void @gemm(ptr %a, i64 %lda, ptr %bpd, i64 %k, ptr %cd, i64 %ldc, i64 %m, i64 %w, "
        "float %alpha, ptr %bu, i1 %nt, ptr %acc)",
        f"  %d1 = add i64 %d, {gc}", "  %more = icmp slt i64 %d1, %n",
        "  br i1 %more, label %group, label %done",
        "done:", "  ret void", "}",
    ]


def pack_jobs(nr: int) -> list[str]:
    """`@pack_job(ctx, lo, hi)`: blocks [lo, hi) of a stack's packing, block u being matrix u / nkb's
    rows (u % nkb) KC.. of `@pack` (or `@pack_bf16`), ctx 8 words: the matrices' addresses (a
    table), element bytes, ldb, k, panels, the packed output, floats a matrix, bf16. `@pack_t_job`:
    matrices [lo, hi) of `@pack_t`, ctx: the table, ldn, k, n, the output, floats a matrix."""
    words = ctx_words(8)
    return [
        "define void @pack_job(ptr %ctx, i64 %lo, i64 %hi) {", "entry:", *words,
        "  %tab = inttoptr i64 %w0 to ptr",
        "  %nkb0 = add i64 %w3, " + str(KC - 1), f"  %nkb = udiv i64 %nkb0, {KC}",
        "  %out = inttoptr i64 %w5 to ptr", "  %bf = icmp ne i64 %w7, 0", "  br label %loop",
        "loop:", "  %u = phi i64 [%lo, %entry], [%u1, %next]",
        "  %i = udiv i64 %u, %nkb", "  %kb = urem i64 %u, %nkb", f"  %k0 = mul i64 %kb, {KC}",
        "  %bp = getelementptr i64, ptr %tab, i64 %i", "  %base = load i64, ptr %bp",
        "  %roff = mul i64 %k0, %w2", "  %boff = mul i64 %roff, %w1", "  %src0 = add i64 %base, %boff",
        "  %src = inttoptr i64 %src0 to ptr", "  %rest = sub i64 %w3, %k0",
        f"  %short = icmp slt i64 %rest, {KC}", f"  %rows = select i1 %short, i64 %rest, i64 {KC}",
        "  %mo = mul i64 %i, %w6", f"  %ko = mul i64 %k0, {nr}", "  %o = add i64 %mo, %ko",
        "  %dst = getelementptr float, ptr %out, i64 %o", f"  %pst = mul i64 %w3, {nr}",
        "  br i1 %bf, label %half, label %full",
        "half:", "  call void @pack_bf16(ptr %src, i64 %w2, i64 %rows, i64 %w4, ptr %dst, i64 %pst)",
        "  br label %next",
        "full:", "  call void @pack(ptr %src, i64 %w2, i64 %rows, i64 %w4, ptr %dst, i64 %pst)",
        "  br label %next",
        "next:", "  %u1 = add i64 %u, 1", "  %more = icmp slt i64 %u1, %hi",
        "  br i1 %more, label %loop, label %done",
        "done:", "  ret void", "}",
        "define void @pack_t_job(ptr %ctx, i64 %lo, i64 %hi) {", "entry:", *ctx_words(6),
        "  %tab = inttoptr i64 %w0 to ptr", "  %out = inttoptr i64 %w4 to ptr", f"  %pst = mul i64 %w2, {nr}",
        "  br label %loop",
        "loop:", "  %i = phi i64 [%lo, %entry], [%i1, %loop]",
        "  %bp = getelementptr i64, ptr %tab, i64 %i", "  %base = load i64, ptr %bp",
        "  %src = inttoptr i64 %base to ptr",
        "  %mo = mul i64 %i, %w5", "  %dst = getelementptr float, ptr %out, i64 %mo",
        "  call void @pack_t(ptr %src, i64 %w1, i64 %w2, i64 %w3, ptr %dst, i64 %pst)",
        "  %i1 = add i64 %i, 1", "  %more = icmp slt i64 %i1, %hi", "  br i1 %more, label %loop, label %done",
        "done:", "  ret void", "}",
    ]


def conv_job() -> list[str]:
    """`@conv_job(ctx, lo, hi)`: `@conv_rows` on output rows [lo, hi), its other arguments at ctx
    (12 words: x, lda, taps, ntaps, cin, rowbase, wo, bp, out, ldc, rowstride, n)."""
    words = ctx_words(12)
    ptrs = [f"  %q{i} = inttoptr i64 %w{i} to ptr" for i in (0, 2, 5, 7, 8)]
    return [
        "define void @conv_job(ptr %ctx, i64 %lo, i64 %hi) {", "entry:", *words, *ptrs,
        "  call void @conv_rows(ptr %q0, i64 %w1, ptr %q2, i64 %w3, i64 %w4, ptr %q5, i64 %lo, i64 %hi, "
        "i64 %w6, ptr %q7, ptr %q8, i64 %w9, i64 %w10, i64 %w11)",
        "  ret void", "}",
    ]
