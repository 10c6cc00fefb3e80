"""The LLVM IR of the host's f32 GEMM and convolution kernels (hlo_run.host_blas JITs it).

Where it sits: `host_blas` compiles `blas_module()` once per process with `host_kernel` and calls
its functions through ctypes (the packing functions' IR is host_blas_pack_ir's, the host team's
job functions' host_blas_jobs'). The GEMM and the convolution are built on one register-blocked
microkernel, as BLIS and XLA:CPU's GEMM libraries build theirs: an MR x NR tile of C (MR rows, NR
columns, NR/16 vectors of 16 floats: 24 accumulators for 12 x 32, which fills the AVX-512 register file with
the B vectors and one broadcast) accumulates sum_k A[i, k] * B[k, j] with one FMA per vector per
k, where A's rows are `lda` floats apart and B is packed: NR consecutive floats per k. The k
loop runs over `taps` (offsets added to every A row) and `cin` values per tap, so the same
microkernel does a GEMM (one tap, cin = K) and a direct convolution (A rows are output pixels
of one image row, the taps are the kernel's window offsets into the padded channels-last input,
cin its input features); B is then the kernel as [taps * cin, output features]. Partial tiles
(fewer rows or columns) read a valid row instead and skip their stores (masked for columns).

    void @gemm(ptr a, i64 lda, ptr bp, i64 k, ptr c, i64 ldc, i64 m, i64 n, float alpha, ptr bias,
               i1 nt, ptr acc)
        C[m, n] = A[m, k] B[k, n] in K blocks of KC (bp: B packed per panel, k x NR floats each), each
        finished value then times alpha plus bias[n] (bias null: none), a GEMM fusion's
        epilogue `add(multiply(dot, alpha), bias)` rounded as its two ops round. The K blocks
        before the last sum into acc (the thread's tile: m x NR floats, m <= 96), so C is written
        once; nt: by streaming stores (C and its rows 64-byte aligned), then a fence; otherwise
        the last K block prefetches each tile's lines of C for writing
    void @units_job(ptr ctx, i64 lo, i64 hi), @pack_job, @pack_t_job, @conv_job
        @gemm on the units of a split product, @pack, @pack_t and @conv_rows over ranges, as the
        host team calls them (their arguments at ctx; hlo_run.host_blas_jobs)
    void @conv_rows(ptr x, i64 lda, ptr taps, i64 ntaps, i64 cin, ptr rowbase, i64 r0, i64 r1,
                    i64 wo, ptr bp, ptr out, i64 ldc, i64 rowstride, i64 n)
        output rows [r0, r1): out[r * rowstride + w * ldc + o] for w < wo, o < n
    void @pack(ptr b, i64 ldb, i64 rows, i64 npan, ptr out, i64 pstride)
        rows of B packed into NR-column panels (what the two above read)
    void @pack_bf16(ptr b, i64 ldb, i64 rows, i64 npan, ptr out, i64 pstride)
        the same from a bf16 B, widened to f32
    void @widen_rows(ptr src, i64 lds, i64 rows, i64 cols, ptr dst, i64 ldd)
        bf16 rows widened to f32 rows (a GEMM unit's rows of a bf16 A)
    void @pack_t(ptr b, i64 ldn, i64 k, i64 n, ptr out, i64 pstride)
        the same panels from B given by its columns (K^T), zero-padded past n
    void @ensure_packed(ptr ctx, i64 i, i64 pg)
        panel group pg of matrix i packed by @pack / @pack_bf16 on first use (host_blas_pack_ir)
    void @gemm_packing(..., ptr lz, i64 i, i64 j0)
        @gemm with B packed a panel group at a time as it goes (host_blas_jobs)
    void @round_bf16(ptr src, ptr dst, i64 n)
        n floats (a multiple of 16) rounded to bf16 as ml_dtypes rounds them

The sums run in a fixed order (K blocks, then k ascending, one FMA each), so a result never
depends on how rows are split over threads. No external symbols: only LLVM intrinsics.
"""

from __future__ import annotations

KC = 256  # K block of `gemm` (a packed B block of KC x NR floats is 32 KiB, in L1 while reused)
ROW_TILES = 8  # MR-row tiles of C per microkernel sweep (96 rows: A's rows then stay in L2 over a K block)
_VF = "<16 x float>"


def tile(avx512: bool) -> tuple[int, int]:
    """(MR, NR) for the host: 12 x 32 with 32 vector registers of 16 floats (24 accumulators, 2 B
    vectors, a broadcast); 6 x 16 with 16 of 8 floats (each <16 x float> takes two)."""
    return (12, 32) if avx512 else (6, 16)


def _microkernel(mr: int, nr: int) -> list[str]:
    """`@mk(a, lda, taps, ntaps, cin, bp, c, ldc, co, ldo, mv, nv, accum, alpha, bias, nt, pf)`: one
    mr x nr tile (mv, nv: the valid rows and columns; accum: add the old values at co (rows ldo
    apart) to the sums; each value stored at c is (sum * alpha) + bias[column], which alpha 1 and
    a bias of -0.0 leave exact; nt: whole vectors go to c by streaming stores, c 64-byte aligned;
    pf: the tile's lines of c are prefetched for writing before the k loop, so the stores after it
    find them in cache: a product whose C is not in cache stalled on the 24 lines' reads for
    ownership at each tile's end, 2-5% of a [512, 1536] product on one thread)."""
    acc = [(i, j) for i in range(mr) for j in range(nr // 16)]
    out = ["define internal void @mk(ptr noalias %a, i64 %lda, ptr noalias %taps, i64 %ntaps, i64 %cin, "
           "ptr noalias %bp, ptr noalias %c, i64 %ldc, ptr noalias %co, i64 %ldo, i64 %mv, i64 %nv, "
           "i1 %accum, float %alpha, ptr noalias %bias, i1 %nt, i1 %pf) alwaysinline {",
           "entry:"]
    for i in range(mr):  # rows past mv read row 0 (always valid) and are not stored
        out += [f"  %ok{i} = icmp slt i64 {i}, %mv", f"  %ri{i} = select i1 %ok{i}, i64 {i}, i64 0",
                f"  %ro{i} = mul i64 %ri{i}, %lda", f"  %ap{i} = getelementptr float, ptr %a, i64 %ro{i}"]
    out += ["  br i1 %pf, label %prefetch, label %tap", "prefetch:", *_prefetch_c(mr, nr)]
    out += ["  br label %tap", "tap:", "  %t = phi i64 [0, %entry], [0, %prefetch], [%t1, %tap_end]",
            "  %bt = phi ptr [%bp, %entry], [%bp, %prefetch], [%bnext, %tap_end]"]
    out += [f"  %s{i}_{j} = phi {_VF} [zeroinitializer, %entry], [zeroinitializer, %prefetch], "
            f"[%n{i}_{j}, %tap_end]" for i, j in acc]
    out += ["  %offp = getelementptr i64, ptr %taps, i64 %t", "  %off = load i64, ptr %offp"]
    out += [f"  %at{i} = getelementptr float, ptr %ap{i}, i64 %off" for i in range(mr)]
    out += ["  br label %kl", "kl:", "  %k = phi i64 [0, %tap], [%k1, %kl]"]
    out += [f"  %p{i}_{j} = phi {_VF} [%s{i}_{j}, %tap], [%n{i}_{j}, %kl]" for i, j in acc]
    out += [f"  %bo = mul i64 %k, {nr}"]
    for j in range(nr // 16):
        out += [f"  %bq{j} = getelementptr float, ptr %bt, i64 %bo",
                f"  %bv{j}p = getelementptr float, ptr %bq{j}, i64 {16 * j}",
                f"  %b{j} = load {_VF}, ptr %bv{j}p, align 4"]
    for i in range(mr):
        out += [f"  %aq{i} = getelementptr float, ptr %at{i}, i64 %k",
                f"  %as{i} = load float, ptr %aq{i}, align 4",
                f"  %ai{i} = insertelement {_VF} poison, float %as{i}, i64 0",
                f"  %av{i} = shufflevector {_VF} %ai{i}, {_VF} poison, <16 x i32> zeroinitializer"]
        out += [f"  %n{i}_{j} = call {_VF} @llvm.fmuladd.v16f32({_VF} %av{i}, {_VF} %b{j}, {_VF} %p{i}_{j})"
                for j in range(nr // 16)]
    out += ["  %k1 = add i64 %k, 1", "  %kmore = icmp slt i64 %k1, %cin",
            "  br i1 %kmore, label %kl, label %tap_end",
            "tap_end:", f"  %tstep = mul i64 %cin, {nr}",
            "  %bnext = getelementptr float, ptr %bt, i64 %tstep",
            "  %t1 = add i64 %t, 1", "  %tmore = icmp slt i64 %t1, %ntaps",
            "  br i1 %tmore, label %tap, label %store",
            "store:"]
    return out + _store_tile(mr, nr) + ["}"]


def _prefetch_c(mr: int, nr: int) -> list[str]:
    """The tile's lines of C (valid rows), fetched for writing while the k loop runs."""
    out = []
    for i in range(mr):
        out += [f"  %pfo{i} = mul i64 %ri{i}, %ldc", f"  %pfr{i} = getelementptr float, ptr %c, i64 %pfo{i}"]
        for j in range(nr // 16):
            out += [f"  %pfq{i}_{j} = getelementptr float, ptr %pfr{i}, i64 {16 * j}",
                    f"  call void @llvm.prefetch.p0(ptr %pfq{i}_{j}, i32 1, i32 3, i32 1)"]
    return out


def _store_tile(mr: int, nr: int) -> list[str]:
    """Store the accumulators at %c (masked columns, valid rows only): added to the old values at
    %co when %accum (the K blocks before, kept in the thread's tile: NR floats a row, so whole
    vectors are read there even past nv), else as they are."""
    lanes = ", ".join(f"i64 {lane}" for lane in range(16))
    out = []
    for j in range(nr // 16):
        out += [f"  %rem{j} = sub i64 %nv, {16 * j}",
                f"  %rs{j} = insertelement <16 x i64> poison, i64 %rem{j}, i64 0",
                f"  %rv{j} = shufflevector <16 x i64> %rs{j}, <16 x i64> poison, <16 x i32> zeroinitializer",
                f"  %mask{j} = icmp slt <16 x i64> <{lanes}>, %rv{j}"]
    out += ["  %al0 = insertelement <16 x float> poison, float %alpha, i64 0",
            "  %alv = shufflevector <16 x float> %al0, <16 x float> poison, <16 x i32> zeroinitializer"]
    for j in range(nr // 16):  # bias: a whole vector by a plain load, a partial one masked
        out += [f"  %full{j} = icmp sge i64 %nv, {16 * (j + 1)}",
                f"  %biq{j} = getelementptr float, ptr %bias, i64 {16 * j}",
                f"  br i1 %full{j}, label %bfull{j}, label %bpart{j}",
                f"bfull{j}:", f"  %biasf{j} = load {_VF}, ptr %biq{j}, align 4", f"  br label %bdone{j}",
                f"bpart{j}:",
                f"  %biasp{j} = call {_VF} @llvm.masked.load.v16f32.p0(ptr %biq{j}, i32 4, "
                f"<16 x i1> %mask{j}, {_VF} zeroinitializer)", f"  br label %bdone{j}",
                f"bdone{j}:", f"  %bias{j} = phi {_VF} [%biasf{j}, %bfull{j}], [%biasp{j}, %bpart{j}]"]
    out.append("  br i1 %accum, label %arow0, label %wrow0")
    for path, adds in (("a", True), ("w", False)):
        for i in range(mr):
            nxt = f"%{path}row{i + 1}" if i + 1 < mr else "%done"
            out += [f"{path}row{i}:", f"  br i1 %ok{i}, label %{path}st{i}, label %done", f"{path}st{i}:",
                    f"  %{path}co{i} = mul i64 {i}, %ldc",
                    f"  %{path}cr{i} = getelementptr float, ptr %c, i64 %{path}co{i}"]
            if adds:
                out += [f"  %oo{i} = mul i64 {i}, %ldo",
                        f"  %or{i} = getelementptr float, ptr %co, i64 %oo{i}"]
            for j in range(nr // 16):
                q, value = f"%{path}cq{i}_{j}", f"%n{i}_{j}"
                out.append(f"  {q} = getelementptr float, ptr %{path}cr{i}, i64 {16 * j}")
                if adds:
                    value = f"%sum{i}_{j}"
                    out += [f"  %oq{i}_{j} = getelementptr float, ptr %or{i}, i64 {16 * j}",
                            f"  %old{i}_{j} = load {_VF}, ptr %oq{i}_{j}, align 4",
                            f"  {value} = fadd {_VF} %old{i}_{j}, %n{i}_{j}"]
                scaled, biased = f"%{path}sc{i}_{j}", f"%{path}bi{i}_{j}"
                out += [f"  {scaled} = fmul {_VF} {value}, %alv",
                        f"  {biased} = fadd {_VF} {scaled}, %bias{j}"]
                out += _overwrite(f"{path}{i}_{j}", j, biased, q)
            out.append(f"  br label {nxt}")
    return out + ["done:", "  ret void"]


def _overwrite(tag: str, j: int, value: str, q: str) -> list[str]:
    """Store vector j of a tile row at q: all 16 lanes valid by a plain store, or with %nt a
    streaming one (no read of the line for ownership: the write of a 16 MiB product no longer
    reads it from memory first); a partial vector masked. Without AVX-512 a masked store is
    VMASKMOVPS, which AMD's Zen cores run as microcode (tens of cycles): masking every store
    cost a 6 x 16 tile 12 of them, a tenth of a 256-deep K block's time."""
    return [f"  br i1 %full{j}, label %fs{tag}, label %ms{tag}",
            f"fs{tag}:", f"  br i1 %nt, label %nts{tag}, label %ps{tag}",
            f"nts{tag}:", f"  store {_VF} {value}, ptr {q}, align 64, !nontemporal !0",
            f"  br label %sd{tag}",
            f"ps{tag}:", f"  store {_VF} {value}, ptr {q}, align 4", f"  br label %sd{tag}",
            f"ms{tag}:",
            f"  call void @llvm.masked.store.v16f32.p0({_VF} {value}, ptr {q}, i32 4, <16 x i1> %mask{j})",
            f"  br label %sd{tag}", f"sd{tag}:"]


def _gemm(mr: int, nr: int) -> list[str]:
    """C's NR-column panels one after another, the K blocks of each panel inside: a panel's C
    tiles (a row block's: 96 x 32 floats) stay in L1/L2 over its K blocks, where sweeping every
    panel per K block moved the whole row block of C (96 x n floats) through L2 once per block."""
    return [
        "define void @gemm(ptr %a, i64 %lda, ptr %bp, i64 %k, ptr %c, i64 %ldc, i64 %m, i64 %n, "
        "float %alpha, ptr %bias, i1 %nt, ptr %acc) {",
        "entry:", "  %hasbias = icmp ne ptr %bias, null", "  br label %j_loop",
        "j_loop:",
        "  %j = phi i64 [0, %entry], [%j1, %j_next]",
        f"  %pan = udiv i64 %j, {nr}", "  %nv = sub i64 %n, %j",
        "  %bj = getelementptr float, ptr %bias, i64 %j",
        "  %cj = getelementptr float, ptr %c, i64 %j",
        "  br label %kb_loop",
        "kb_loop:",
        "  %kb = phi i64 [0, %j_loop], [%kb1, %kb_next]",
        "  %krest = sub i64 %k, %kb", f"  %kc0 = icmp slt i64 %krest, {KC}",
        f"  %kc = select i1 %kc0, i64 %krest, i64 {KC}",
        "  %accum = icmp ne i64 %kb, 0",
        "  %kend = add i64 %kb, %kc", "  %last = icmp sge i64 %kend, %k",
        "  %alk = select i1 %last, float %alpha, float 1.0", "  %usebias = and i1 %last, %hasbias",
        "  %cached = xor i1 %nt, true", "  %pfk = and i1 %last, %cached", "  %ntk = and i1 %nt, %last",
        "  %bjp = select i1 %usebias, ptr %bj, ptr @neg_zero",
        # the K blocks before the last sum into the thread's tile; the last adds it and writes C
        "  %dst = select i1 %last, ptr %cj, ptr %acc", f"  %ldd = select i1 %last, i64 %ldc, i64 {nr}",
        f"  %bkoff = mul i64 %kb, {nr}", f"  %pst = mul i64 %k, {nr}", "  %poff = mul i64 %pan, %pst",
        "  %boff = add i64 %bkoff, %poff",
        "  %bpp = getelementptr float, ptr %bp, i64 %boff",
        "  %ak = getelementptr float, ptr %a, i64 %kb",
        "  br label %i_loop", *_gemm_tiles(mr, nr),
        "kb_next:",
        "  %kb1 = add i64 %kb, %kc", "  %kbmore = icmp slt i64 %kb1, %k",
        "  br i1 %kbmore, label %kb_loop, label %j_next",
        "j_next:",
        f"  %j1 = add i64 %j, {nr}", "  %jmore = icmp slt i64 %j1, %n",
        "  br i1 %jmore, label %j_loop, label %out",
        # streaming stores are weakly ordered: fenced before another thread may read C
        "out:", "  br i1 %nt, label %fence, label %done", "fence:", "  fence seq_cst", "  br label %done",
        "done:", "  ret void", "}",
    ]


def _gemm_tiles(mr: int, nr: int) -> list[str]:
    """`@gemm`'s loop over the MR-row tiles of a panel's K block, the sums to C (the last K block)
    or to the thread's tile."""
    args = (f"ptr @zero_tap, i64 1, i64 %kc, ptr %bpp, ptr %cp, i64 %ldd, ptr %op, i64 {nr}, i64 %mv, "
            "i64 %nv, i1 %accum, float %alk, ptr %bjp, i1 %ntk, i1 %pfk")
    return [
        "i_loop:",
        "  %i = phi i64 [0, %kb_loop], [%i1, %i_loop]",
        "  %arow = mul i64 %i, %lda", "  %ap = getelementptr float, ptr %ak, i64 %arow",
        "  %crow = mul i64 %i, %ldd", "  %cp = getelementptr float, ptr %dst, i64 %crow",
        f"  %orow = mul i64 %i, {nr}", "  %op = getelementptr float, ptr %acc, i64 %orow",
        "  %mv = sub i64 %m, %i",
        f"  call void @mk(ptr %ap, i64 %lda, {args})",
        f"  %i1 = add i64 %i, {mr}", "  %imore = icmp slt i64 %i1, %m",
        "  br i1 %imore, label %i_loop, label %kb_next",
    ]


def _conv_rows(mr: int, nr: int) -> list[str]:
    return [
        "define void @conv_rows(ptr %x, i64 %lda, ptr %taps, i64 %ntaps, i64 %cin, ptr %rowbase, i64 %r0, "
        "i64 %r1, i64 %wo, ptr %bp, ptr %out, i64 %ldc, i64 %rowstride, i64 %n) {",
        "entry:",
        "  %kt = mul i64 %ntaps, %cin", f"  %pst = mul i64 %kt, {nr}",
        "  %any = icmp slt i64 %r0, %r1", "  br i1 %any, label %r_loop, label %out_done",
        "r_loop:",
        "  %r = phi i64 [%r0, %entry], [%r1n, %r_next]",
        "  %rbp = getelementptr i64, ptr %rowbase, i64 %r", "  %rb = load i64, ptr %rbp",
        "  %xr = getelementptr float, ptr %x, i64 %rb",
        "  %oro = mul i64 %r, %rowstride", "  %orow = getelementptr float, ptr %out, i64 %oro",
        "  br label %j_loop",
        "j_loop:",
        "  %j = phi i64 [0, %r_loop], [%j1, %j_next]",
        f"  %pan = udiv i64 %j, {nr}", "  %poff = mul i64 %pan, %pst",
        "  %bpp = getelementptr float, ptr %bp, i64 %poff", "  %nv = sub i64 %n, %j",
        "  %oj = getelementptr float, ptr %orow, i64 %j",
        "  br label %w_loop",
        "w_loop:",
        "  %w = phi i64 [0, %j_loop], [%w1, %w_loop]",
        "  %xo = mul i64 %w, %lda", "  %xw = getelementptr float, ptr %xr, i64 %xo",
        "  %oo = mul i64 %w, %ldc", "  %ow = getelementptr float, ptr %oj, i64 %oo",
        "  %mv = sub i64 %wo, %w",
        "  call void @mk(ptr %xw, i64 %lda, ptr %taps, i64 %ntaps, i64 %cin, ptr %bpp, ptr %ow, i64 %ldc, "
        "ptr %ow, i64 %ldc, i64 %mv, i64 %nv, i1 false, float 1.0, ptr @neg_zero, i1 false, i1 true)",
        f"  %w1 = add i64 %w, {mr}", "  %wmore = icmp slt i64 %w1, %wo",
        "  br i1 %wmore, label %w_loop, label %j_next",
        "j_next:",
        f"  %j1 = add i64 %j, {nr}", "  %jmore = icmp slt i64 %j1, %n",
        "  br i1 %jmore, label %j_loop, label %r_next",
        "r_next:",
        "  %r1n = add i64 %r, 1", "  %rmore = icmp slt i64 %r1n, %r1",
        "  br i1 %rmore, label %r_loop, label %out_done",
        "out_done:", "  ret void", "}",
    ]


def _widen_rows() -> list[str]:
    """`@widen_rows(src, lds, rows, cols, dst, ldd)`: a block of bf16 rows (lds values apart)
    widened to f32 rows (ldd floats apart), exactly: a GEMM unit's rows of a bf16 A, in L2 for
    its product, where widening all of A first wrote and read a full f32 copy (16 MiB of the bf16
    MLP block's second GEMM)."""
    return [
        "define void @widen_rows(ptr noalias %src, i64 %lds, i64 %rows, i64 %cols, ptr noalias %dst, "
        "i64 %ldd) {",
        "entry:", "  %anyr = icmp sgt i64 %rows, 0", "  %anyc = icmp sgt i64 %cols, 0",
        "  %go = and i1 %anyr, %anyc", "  br i1 %go, label %r_loop, label %done",
        "r_loop:",
        "  %r = phi i64 [0, %entry], [%r1, %r_next]",
        "  %so = mul i64 %r, %lds", "  %sr = getelementptr i16, ptr %src, i64 %so",
        "  %do = mul i64 %r, %ldd", "  %dr = getelementptr float, ptr %dst, i64 %do",
        "  br label %c_loop",
        "c_loop:",
        "  %c = phi i64 [0, %r_loop], [%c1, %c_loop]",
        "  %sp = getelementptr i16, ptr %sr, i64 %c", "  %h = load i16, ptr %sp, align 2",
        "  %w = zext i16 %h to i32", "  %u = shl i32 %w, 16", "  %x = bitcast i32 %u to float",
        "  %dp = getelementptr float, ptr %dr, i64 %c", "  store float %x, ptr %dp, align 4",
        "  %c1 = add i64 %c, 1", "  %cmore = icmp slt i64 %c1, %cols",
        "  br i1 %cmore, label %c_loop, label %r_next",
        "r_next:",
        "  %r1 = add i64 %r, 1", "  %rmore = icmp slt i64 %r1, %rows",
        "  br i1 %rmore, label %r_loop, label %done",
        "done:", "  ret void", "}",
    ]


def _round_bf16() -> list[str]:
    """`@round_bf16(src, dst, n)`: n f32 (a multiple of 16) rounded to bf16 bits, to nearest even,
    a NaN to the quiet NaN of its sign, as ml_dtypes (the interpreter) rounds them, 16 lanes a
    vector (a GEMM fusion's bf16 result and epilogue; ml_dtypes took 0.3 ns a value)."""
    v32, v16 = "<16 x i32>", "<16 x i16>"

    def splat(x: int) -> str:
        return f"<{', '.join([f'i32 {x}'] * 16)}>"

    return [
        "define void @round_bf16(ptr noalias %src, ptr noalias %dst, i64 %n) {",
        "entry:", "  %any = icmp sgt i64 %n, 0", "  br i1 %any, label %loop, label %done",
        "loop:",
        "  %i = phi i64 [0, %entry], [%i1, %loop]",
        "  %sp = getelementptr float, ptr %src, i64 %i", f"  %x = load {_VF}, ptr %sp, align 4",
        f"  %u = bitcast {_VF} %x to {v32}",
        f"  %hi = lshr {v32} %u, {splat(16)}", f"  %lsb = and {v32} %hi, {splat(1)}",
        f"  %b0 = add {v32} %u, {splat(32767)}", f"  %b1 = add {v32} %b0, %lsb",
        f"  %r = lshr {v32} %b1, {splat(16)}", f"  %sg = and {v32} %hi, {splat(0x8000)}",
        f"  %q = or {v32} %sg, {splat(0x7FC0)}",
        f"  %nan = fcmp uno {_VF} %x, %x", f"  %o = select <16 x i1> %nan, {v32} %q, {v32} %r",
        f"  %t = trunc {v32} %o to {v16}",
        "  %dp = getelementptr i16, ptr %dst, i64 %i", f"  store {v16} %t, ptr %dp, align 2",
        "  %i1 = add i64 %i, 16", "  %more = icmp slt i64 %i1, %n",
        "  br i1 %more, label %loop, label %done",
        "done:", "  ret void", "}",
    ]


def blas_module(mr: int, nr: int) -> str:
    """The module's LLVM IR text for an mr x nr tile (target triple and data layout are set by the JIT)."""
    head = [
        f"declare {_VF} @llvm.fmuladd.v16f32({_VF}, {_VF}, {_VF})",
        "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)",
        f"declare {_VF} @llvm.masked.load.v16f32.p0(ptr, i32, <16 x i1>, {_VF})",
        f"declare void @llvm.masked.store.v16f32.p0({_VF}, ptr, i32, <16 x i1>)",
        "@zero_tap = private constant [1 x i64] zeroinitializer",
        "!0 = !{i32 1}",
        f"@neg_zero = private constant [{nr} x float] [{', '.join(['float -0.0'] * nr)}]",
    ]
    from hlo_run.host_blas_jobs import conv_job, gemm_packing, pack_jobs, units_job
    from hlo_run.host_blas_pack_ir import ensure_packed_ir, pack_ir, pack_t_ir

    parts = [_microkernel(mr, nr), _gemm(mr, nr), gemm_packing(nr), units_job(mr, nr), pack_jobs(nr),
             conv_job(), _conv_rows(mr, nr), pack_ir(nr), pack_ir(nr, bf16=True), pack_t_ir(nr),
             ensure_packed_ir(nr), _widen_rows(), _round_bf16()]
    return "\n".join(head + [line for part in parts for line in part]) + "\n"
