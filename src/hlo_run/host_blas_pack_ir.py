"""The LLVM IR of the host GEMM's packing functions (hlo_run.host_blas_ir's module holds them):
`@pack` / `@pack_bf16` lay B's rows out in NR-column panels, `@pack_t` the same from B given by its
columns. host_blas_ir documents their signatures.
"""

from __future__ import annotations

from hlo_run.host_blas_ir import _VF
from hlo_run.host_blas_jobs import ctx_words

PACK_ROW_BYTES = 256  # `@pack` reads this much of a row of B (a group of panels) at a time
# Panels a lazily packed group holds (`@ensure_packed`): 128 columns a group with AVX2's NR of 16
PACK_GROUP_PANELS = 8


def _pack_copy(nr: int, el: str, bf16: bool, group: int, tag: str) -> list[str]:
    """One row (k) of `group` panels: srow (B's row at the group's first column) to each panel's
    row k (drow{q})."""
    body = []
    for q in range(group):
        for v in range(nr // 16):
            t = f"{tag}{q}_{v}"
            body += [f"  %src{t} = getelementptr {el}, ptr %srow{tag}, i64 {q * nr + 16 * v}",
                     f"  %dst{t} = getelementptr float, ptr %drow{tag}{q}, i64 {16 * v}"]
            if bf16:
                body += [f"  %h{t} = load <16 x i16>, ptr %src{t}, align 2",
                         f"  %w{t} = zext <16 x i16> %h{t} to <16 x i32>",
                         f"  %u{t} = shl <16 x i32> %w{t}, <{', '.join(['i32 16'] * 16)}>",
                         f"  %x{t} = bitcast <16 x i32> %u{t} to {_VF}"]
            else:
                body.append(f"  %x{t} = load {_VF}, ptr %src{t}, align 4")
            body.append(f"  store {_VF} %x{t}, ptr %dst{t}, align 4")
    return body


def _pack_loop(nr: int, el: str, bf16: bool, group: int, tag: str, first: str, last: str,
               nxt: str) -> list[str]:
    """Panels [first, last) of `@pack`, `group` at a time (last - first a multiple of group), then
    a branch to `nxt`."""
    heads = [line for q in range(group) for line in (
        f"  %pq{tag}{q} = add i64 %p{tag}, {q}", f"  %poff{tag}{q} = mul i64 %pq{tag}{q}, %pstride",
        f"  %po{tag}{q} = getelementptr float, ptr %out, i64 %poff{tag}{q}")]
    rows = [f"  %drow{tag}{q} = getelementptr float, ptr %po{tag}{q}, i64 %doff{tag}" for q in range(group)]
    return [
        f"  %any{tag} = icmp slt i64 {first}, {last}", f"  br i1 %any{tag}, label %p_loop{tag}, label %{nxt}",
        f"p_loop{tag}:",
        f"  %p{tag} = phi i64 [{first}, %{tag}entry], [%p1{tag}, %p_next{tag}]",
        f"  %pcol{tag} = mul i64 %p{tag}, {nr}", f"  %pb{tag} = getelementptr {el}, ptr %b, i64 %pcol{tag}",
        *heads, f"  br label %k_loop{tag}",
        f"k_loop{tag}:",
        f"  %k{tag} = phi i64 [0, %p_loop{tag}], [%k1{tag}, %k_loop{tag}]",
        f"  %soff{tag} = mul i64 %k{tag}, %ldb",
        f"  %srow{tag} = getelementptr {el}, ptr %pb{tag}, i64 %soff{tag}",
        f"  %doff{tag} = mul i64 %k{tag}, {nr}", *rows, *_pack_copy(nr, el, bf16, group, tag),
        f"  %k1{tag} = add i64 %k{tag}, 1", f"  %kmore{tag} = icmp slt i64 %k1{tag}, %rows",
        f"  br i1 %kmore{tag}, label %k_loop{tag}, label %p_next{tag}",
        f"p_next{tag}:",
        f"  %p1{tag} = add i64 %p{tag}, {group}", f"  %pmore{tag} = icmp slt i64 %p1{tag}, {last}",
        f"  br i1 %pmore{tag}, label %p_loop{tag}, label %{nxt}",
    ]


def pack_ir(nr: int, bf16: bool = False) -> list[str]:
    """`@pack(b, ldb, rows, npan, out, pstride)`: rows of B (rows x npan * nr floats, rows ldb
    floats apart) into its packed panels (`host_blas.pack_panels`' layout), panel p's rows at
    out + p * pstride, nr floats a row. `@pack_bf16` (bf16): the same from a bf16 B, each value
    widened to f32 as it is copied (exact: its bits in the upper half). Panels go a group at a
    time (PACK_ROW_BYTES of each row read at once), the rest one by one: a single panel's column
    strip of 64 bytes a row, rows a page or more apart, defeated the hardware prefetcher (a
    [512, 2048] B took 1.3 ms on a Zen 3 core)."""
    el = "i16" if bf16 else "float"
    group = max(1, PACK_ROW_BYTES // (4 * nr))
    name = "pack_bf16" if bf16 else "pack"
    return [
        f"define void @{name}(ptr noalias %b, i64 %ldb, i64 %rows, i64 %npan, ptr noalias %out, "
        "i64 %pstride) {",
        "entry:", "  %any = icmp sgt i64 %rows, 0", "  br i1 %any, label %gentry, label %done",
        "gentry:", f"  %ng = udiv i64 %npan, {group}", f"  %pend = mul i64 %ng, {group}",
        *_pack_loop(nr, el, bf16, group, "g", "0", "%pend", "sentry"),
        "sentry:", *_pack_loop(nr, el, bf16, 1, "s", "%pend", "%npan", "done"),
        "done:", "  ret void", "}",
    ]


def pack_t_ir(nr: int) -> list[str]:
    """`@pack_t(b, ldn, k, n, out, pstride)`: B given by its columns (column j's k floats
    contiguous at b + j * ldn: the transposed operand of an attention product, K^T) packed into
    its NR-column panels as `@pack` packs rows, columns past n as zeros. Each column is read in
    order and written down its panel (NR floats apart): reading across columns instead (one float
    of each per k) touched NR lines ldn floats apart, which share a few L1 sets when ldn is a
    multiple of 512."""
    return [
        "define void @pack_t(ptr noalias %b, i64 %ldn, i64 %k, i64 %n, ptr noalias %out, i64 %pstride) {",
        "entry:", "  %anyk = icmp sgt i64 %k, 0", "  %anyn = icmp sgt i64 %n, 0",
        "  %go = and i1 %anyk, %anyn", "  br i1 %go, label %c_loop, label %done",
        "c_loop:",  # every column of every panel, padding columns included
        "  %j = phi i64 [0, %entry], [%j1, %c_next]",
        f"  %pan = udiv i64 %j, {nr}", f"  %c = urem i64 %j, {nr}",
        "  %poff = mul i64 %pan, %pstride", "  %doff = add i64 %poff, %c",
        "  %dst = getelementptr float, ptr %out, i64 %doff",
        "  %in = icmp slt i64 %j, %n",
        "  %jc = select i1 %in, i64 %j, i64 0",  # a padding column reads column 0, stores zeros
        "  %soff = mul i64 %jc, %ldn", "  %src = getelementptr float, ptr %b, i64 %soff",
        "  br label %k_loop",
        "k_loop:",
        "  %kk = phi i64 [0, %c_loop], [%k1, %k_loop]",
        "  %sp = getelementptr float, ptr %src, i64 %kk", "  %x = load float, ptr %sp, align 4",
        "  %v = select i1 %in, float %x, float 0.0",
        f"  %dk = mul i64 %kk, {nr}", "  %dp = getelementptr float, ptr %dst, i64 %dk",
        "  store float %v, ptr %dp, align 4",
        "  %k1 = add i64 %kk, 1", "  %kmore = icmp slt i64 %k1, %k",
        "  br i1 %kmore, label %k_loop, label %c_next",
        "c_next:",
        "  %j1 = add i64 %j, 1", "  %npad = add i64 %n, " + str(nr - 1),
        f"  %nall = udiv i64 %npad, {nr}", f"  %ncols = mul i64 %nall, {nr}",
        "  %jmore = icmp slt i64 %j1, %ncols",
        "  br i1 %jmore, label %c_loop, label %done",
        "done:", "  ret void", "}",
    ]


def ensure_packed_ir(nr: int) -> list[str]:
    """`@ensure_packed(ctx, i, pg)`: returns once panel group pg (PACK_GROUP_PANELS panels, all k
    rows) of matrix i of a stack is packed (`@pack` or `@pack_bf16`), packing it if no thread has
    claimed it: a group's flag goes 0 -> 1 (claimed, by a compare-and-swap) -> 2 (packed, a
    release store). A thread that finds its group claimed by another packs the next unclaimed
    group of the matrix meanwhile, and spins only when none is left. So a GEMM's units pack B as
    they reach it, every thread taking part, and one thread's packing (bound by memory) overlaps
    another's multiplying. ctx: 11 words: the matrices' addresses (a table), element bytes, ldb,
    k, panels, the packed output, floats a packed matrix, bf16, the flags (an i32 per matrix and
    group, zeroed), panels a group, groups a matrix."""
    return [
        "define internal void @pack_group(ptr %ctx, i64 %i, i64 %pg, ptr %fp) {", "entry:", *ctx_words(8),
        "  %tab = inttoptr i64 %w0 to ptr", "  %tp = getelementptr i64, ptr %tab, i64 %i",
        "  %w9p = getelementptr i64, ptr %ctx, i64 9", "  %w9 = load i64, ptr %w9p",
        "  %base = load i64, ptr %tp", "  %p0 = mul i64 %pg, %w9", f"  %c0 = mul i64 %p0, {nr}",
        "  %soff = mul i64 %c0, %w1", "  %src0 = add i64 %base, %soff", "  %src = inttoptr i64 %src0 to ptr",
        "  %left = sub i64 %w4, %p0", "  %short = icmp slt i64 %left, %w9",
        "  %np = select i1 %short, i64 %left, i64 %w9",
        "  %mo = mul i64 %i, %w6", "  %po = mul i64 %c0, %w3", "  %o = add i64 %mo, %po",
        "  %out = inttoptr i64 %w5 to ptr", "  %dst = getelementptr float, ptr %out, i64 %o",
        f"  %pst = mul i64 %w3, {nr}", "  %bf = icmp ne i64 %w7, 0", "  br i1 %bf, label %half, label %full",
        "half:", "  call void @pack_bf16(ptr %src, i64 %w2, i64 %w3, i64 %np, ptr %dst, i64 %pst)",
        "  br label %publish",
        "full:", "  call void @pack(ptr %src, i64 %w2, i64 %w3, i64 %np, ptr %dst, i64 %pst)",
        "  br label %publish",
        "publish:", "  store atomic i32 2, ptr %fp release, align 4", "  ret void", "}",
        "define void @ensure_packed(ptr %ctx, i64 %i, i64 %pg) {", "entry:",
        "  %w8p = getelementptr i64, ptr %ctx, i64 8", "  %w8 = load i64, ptr %w8p",
        "  %w10p = getelementptr i64, ptr %ctx, i64 10", "  %w10 = load i64, ptr %w10p",
        "  %flags = inttoptr i64 %w8 to ptr", "  %fi0 = mul i64 %i, %w10",
        "  %fp0 = getelementptr i32, ptr %flags, i64 %fi0", "  %fp = getelementptr i32, ptr %fp0, i64 %pg",
        "  br label %check",
        "check:", "  %s = load atomic i32, ptr %fp acquire, align 4", "  %ready = icmp eq i32 %s, 2",
        "  br i1 %ready, label %done, label %claim",
        "claim:", "  %x = cmpxchg ptr %fp, i32 0, i32 1 acq_rel acquire",
        "  %won = extractvalue { i32, i1 } %x, 1", "  br i1 %won, label %mine, label %help",
        "mine:", "  call void @pack_group(ptr %ctx, i64 %i, i64 %pg, ptr %fp)", "  br label %done",
        # another thread packs pg: pack the next unclaimed group of the matrix, if any, then look again
        "help:", "  br label %scan",
        "scan:", "  %q = phi i64 [%pg, %help], [%q1, %taken]", "  %q1 = add i64 %q, 1",
        "  %end = icmp sge i64 %q1, %w10", "  br i1 %end, label %check, label %try",
        "try:", "  %fq = getelementptr i32, ptr %fp0, i64 %q1",
        "  %sq = load atomic i32, ptr %fq monotonic, align 4", "  %free = icmp eq i32 %sq, 0",
        "  br i1 %free, label %grab, label %taken",
        "grab:", "  %xq = cmpxchg ptr %fq, i32 0, i32 1 acq_rel monotonic",
        "  %got = extractvalue { i32, i1 } %xq, 1", "  br i1 %got, label %packq, label %taken",
        "packq:", "  call void @pack_group(ptr %ctx, i64 %i, i64 %q1, ptr %fq)", "  br label %check",
        "taken:", "  br label %scan",
        "done:", "  ret void", "}",
    ]
