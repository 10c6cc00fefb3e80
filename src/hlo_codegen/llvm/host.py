"""Host lowering: the kernel IR as a CPU function that runs whole thread blocks.

Where it sits: `lower_to_host(kernel)` gives LLVM IR text that hlo_run.host_kernel JITs. The
kernel becomes

    void @<name>(ptr %args, i64 %block_begin, i64 %block_end)

where `args` points to one `ptr` per kernel parameter (in order) and the function runs the
blocks with linear ids in [block_begin, block_end) (linear id = x + gx * (y + gy * z)). Inside a
block the threads become loops. `sync_threads` and `shuffle_reduce` split the body into phases;
each phase runs for every thread of the block (thread linear id = x + bx * (y + by * z)) before
the next starts. Values that live across a phase boundary are kept in per-thread arrays (thread
and block ids and constants are recomputed instead). `shuffle_reduce` is emulated through a
per-thread scratch array with `shfl.sync.down` semantics - lane i reads lane i + d when that is
below 32 (and an existing thread), else its own value - so the reduction tree and the float
results are the GPU's. The emulation's loops are parallel too (each step copies the values, then
every thread reads its partner from the copy with a plain load and a select), and per-thread
arrays keep i1 values as bytes, which the vectorizer can load and store: on the f32 layer norm
this took the kernel from 8.3 to 3.7 ms. Shared memory is a per-call stack array; math uses
math.py.

Speed: the thread loop of each phase is marked parallel (`llvm.loop.parallel_accesses`, every
memory access and call of its body in one access group; in kernels of at most
MAX_PARALLEL_PHASES phases): the threads of a phase never depend on each other without a barrier
between them, so LLVM's loop vectorizer may run 8-16 threads in SIMD lanes without alias
checks. For that the loop must hold no vector-typed instruction, so kernel-IR vectors are kept
as scalar lanes (`scalarize_vectors`, lanes.py), and the straight-line math and float-conversion
functions are `alwaysinline` (a call blocks vectorization). Results are unchanged: the same IEEE
operations, with the threads of a phase in a different order. On the bf16 GELU's tanh kernel
this took the run from 0.66 to 0.125 CPU seconds. A phase that acts only in lane 0 of each warp
(`if th_x % 32 == 0`) loops over those threads alone, an output of at least 16 MiB that
each block writes as one contiguous range is staged on the stack and copied out with
non-temporal stores (host_stream.py), and a block whose first phase reads one contiguous range
of an input prefetches the next block's range once that phase is done (host_prefetch.py).
"""

from __future__ import annotations

from hlo_common.manifest.kernel_symbols import host_may_declare

from hlo_codegen.kernel_ir.ir import OP_SPECS, Kernel, Op, Value, buffer_bytes
from hlo_codegen.kernel_ir.verifier import verify_kernel
from hlo_codegen.llvm.host_prefetch import LINE, PrefetchedInput, prefetched_inputs
from hlo_codegen.llvm.host_shuffle import ShuffleLowering, load_value, mem_type, store_value
from hlo_codegen.llvm.host_stream import CHUNK, StreamedOutput, streamed_outputs
from hlo_codegen.llvm.lane0 import lane0_stride
from hlo_codegen.llvm.lowering import (
    I64, LoweringError, ModuleLowering, RegionLowering, Target, llvm_type,
)
from hlo_codegen.llvm.text import LV, LLModule

_NEVER_REMATERIALIZE = ("load", "call")
_DIMS = ("x", "y", "z")


INLINE_MAX_INSTRUCTIONS = 400  # straight-line helper functions up to this size are inlined
# Kernels with more thread phases than this (a bitonic sort has ~50) keep plain thread loops:
# vectorizing every phase tripled their JIT time (0.66 -> 1.6 s) to halve a ~50 ms run.
MAX_PARALLEL_PHASES = 8
NEST_MIN_X = 16  # thread phases of blocks at least this wide in x (and 2-d or 3-d) loop over x inside


class HostTarget(Target):
    name = "host"
    triple = "x86_64-unknown-linux-gnu"  # host_kernel replaces it with the JIT's triple
    scalarize_vectors = True

    def thread_id(self, rl: RegionLowering, dim: str) -> LV:
        return rl.ids[f"th_{dim}"]

    def block_id(self, rl: RegionLowering, dim: str) -> LV:
        return rl.ids[f"bl_{dim}"]


def inline_helpers(module: LLModule) -> None:
    """Mark the module's straight-line `__hlo_*` helpers (math, float conversions) alwaysinline."""
    for f in module.functions:
        if f.name.startswith("__hlo_") and not f.suffix and len(f.blocks) == 1 \
                and len(f.blocks[0][1]) <= INLINE_MAX_INSTRUCTIONS:
            f.suffix = "alwaysinline"


# Ops whose f32 forms are long inline polynomials (math.py): a thread loop holding one is
# vectorized with at most MATH_INTERLEAVE vectors in flight.
HEAVY_MATH = frozenset("exp expm1 log log1p tanh sin cos tan sinh cosh asin acos atan asinh acosh atanh "
                       "erf cbrt powf atan2".split())
MATH_INTERLEAVE = 2


def parallel_loop_metadata(module: LLModule, interleave: int | None = None) -> tuple[str, str]:
    """(access group, loop id) of a loop whose iterations are independent; `interleave`: the
    vectorizer's interleave count for it (None: its own choice)."""
    group = module.metadata("distinct !{}")
    parallel = module.metadata(f'!{{!"llvm.loop.parallel_accesses", {group}}}')
    count = "" if interleave is None else f', !{{!"llvm.loop.interleave.count", i32 {interleave}}}'
    return group, module.metadata("distinct !{{self}, " + parallel + count + "}")


def _nested(ops: list[Op]):
    """Every op of `ops` and of the regions inside them."""
    for op in ops:
        yield op
        for r in op.regions:
            yield from r.walk()


def _heavy_math(ops: list[Op]) -> bool:
    """Whether a phase computes an op of HEAVY_MATH. LLVM's vectorizer interleaved such a loop 4-8
    vectors deep, as for a short body: the exp pass of the bf16 softmax then spilled a tenth of
    its instructions to the stack on a 16-register AVX2 core (two vectors: 9.5 -> 8.7 ms)."""
    return any(inner.name in HEAVY_MATH for inner in _nested(ops))


def _phases(kernel: Kernel) -> list[list[Op]]:
    """Top-level ops split at barriers; a shuffle_reduce is a phase of its own."""
    phases: list[list[Op]] = [[]]
    for op in kernel.body.ops:
        if op.name == "sync_threads":
            phases.append([])
        elif op.name == "shuffle_reduce":
            phases.append([op])
            phases.append([])
        else:
            phases[-1].append(op)
    return [p for p in phases if p]


def _uses(ops: list[Op]) -> list[Value]:
    out, seen = [], set()
    for inner in _nested(ops):
        for v in inner.operands:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


def _stable_inputs(kernel: Kernel, phases: list[list[Op]]) -> set[str]:
    """The parameters a load of which may be repeated in a later phase instead of being kept in a
    per-thread array (the f32 softmax's eight loaded values a thread: 2.9 -> 2.6 ms): those the
    kernel never writes, when its stores to parameters are all in its last phase (none: every such
    parameter). A parameter may share its buffer with an output only when it reaches that output
    through elementwise ops (hlo_common.analysis.sharing), so each such element is read and
    written by one thread, which loads it before it stores."""
    params = {b.name for b in kernel.params}
    early = (inner for ops in phases[:-1] for inner in _nested(ops))
    if any(o.name in ("store", "atomic_rmw") and o.attrs.get("buffer") in params for o in early):
        return set()
    return {b.name for b in kernel.params if not b.written}


class _KernelLowering(ShuffleLowering):
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.ml = ModuleLowering(kernel, HostTarget())
        self.ml.lower_functions()
        self.phases = _phases(kernel)
        self.def_phase: dict[int, int] = {}
        self.def_op: dict[int, Op] = {}
        for p, ops in enumerate(self.phases):
            for op in ops:
                for r in op.results:
                    self.def_phase[id(r)] = p
                    self.def_op[id(r)] = op
        self.spills: dict[int, LV] = {}
        self._remat: dict[int, bool] = {}
        self.stable_inputs = _stable_inputs(kernel, self.phases)
        self.streams = streamed_outputs(kernel, self.phases)
        self.prefetches = prefetched_inputs(kernel, self.phases, any(map(_heavy_math, self.phases[1:])))
        self.redirect: dict[str, tuple[LV, LV]] = {}  # output -> (stage, block offset): last phase

    def rematerializable(self, op: Op) -> bool:
        """Cheap pure ops of thread/block ids and constants: recomputed in each phase, not spilled."""
        hit = self._remat.get(id(op))
        if hit is None:
            spec = OP_SPECS[op.name]
            pure = (spec.kind == "pure" and op.name not in _NEVER_REMATERIALIZE) or (
                op.name == "load" and op.attrs["buffer"] in self.stable_inputs)
            hit = (pure and not op.regions
                   and all(id(v) in self.def_op and self.rematerializable(self.def_op[id(v)])
                           for v in op.operands))
            self._remat[id(op)] = hit
        return hit

    def lower(self) -> str:
        k = self.kernel
        f = self.ml.module.function(k.name, "void",
                                    [("ptr", "args"), (I64, "block_begin"), (I64, "block_end")])
        self.fn = f
        self.buffers = {}
        for i, p in enumerate(k.params):
            slot = f.gep("ptr", f.args[0], LV(I64, str(i)))
            self.buffers[p.name] = f.load("ptr", slot, 8)
        for b in k.buffers:
            if b.kind == "shared":
                self.buffers[b.name] = f.alloca(f"[{max(1, buffer_bytes(b))} x i8]")
        self._allocate_spills()
        rl = self._region()
        head, body, done = f.new_block("blocks"), f.new_block("block_body"), f.new_block("done")
        pre = f.current
        f.cbr(f.icmp("slt", f.args[1], f.args[2]), head, done)
        f.set_block(head)
        blk, phi = f.phi(I64, "blk")
        phi.incoming.append((f.args[1].ref, pre))
        f.br(body)
        f.set_block(body)
        self.block_ids = self._delinearize(blk, k.grid, "bl")
        self._block(blk)
        nxt = f.binop("add", blk, LV(I64, "1"))
        phi.incoming.append((nxt.ref, f.current))
        f.cbr(f.icmp("slt", nxt, f.args[2]), head, done)
        f.set_block(done)
        if self.streams:  # the non-temporal stores reach memory before the launch is seen done
            f.emit("fence seq_cst")
        f.ret()
        del rl
        inline_helpers(self.ml.module)
        outside = sorted(n for n in self.ml.module.declarations if not host_may_declare(n))
        if outside:  # hlo-run would refuse the kernel (hlo_common.manifest.kernel_symbols)
            raise LoweringError(f"kernel @{k.name}: the host lowering declared @{outside[0]}, which is "
                                "not in hlo_common.manifest.kernel_symbols")
        return self.ml.text()

    def _block(self, blk: LV) -> None:
        """The phases of block `blk`; the last one's stores to streamed outputs staged, then
        copied out (host_stream.py)."""
        f = self.fn
        stages = {s.buffer: f.alloca(f"[{s.length * s.esize} x i8]", 64) for s in self.streams}
        offsets = {}
        for p, ops in enumerate(self.phases):
            if p == 1:
                for pf in self.prefetches:
                    self._prefetch_next(pf, blk)
            if p == len(self.phases) - 1:
                offsets = {s.buffer: f.binop("add", f.binop("mul", blk, LV(I64, str(s.stride))),
                                             LV(I64, str(s.first))) for s in self.streams}
                self.redirect = {name: (stages[name], offsets[name]) for name in stages}
            if ops[0].name == "shuffle_reduce":
                self._shuffle_phase(p, ops[0])
            else:
                self._thread_phase(p, ops)
        self.redirect = {}
        for s in self.streams:
            self._stream_out(s, stages[s.buffer], offsets[s.buffer])

    def _prefetch_next(self, pf: PrefetchedInput, blk: LV) -> None:
        """Ask for block blk + 1's range of input `pf`, a line at a time, into L2 (host_prefetch.py).
        The address is computed without `inbounds`: past the input it is only a hint."""
        f = self.fn
        start = f.binop("add", f.binop("mul", f.binop("add", blk, LV(I64, "1")), LV(I64, str(pf.stride))),
                        LV(I64, str(pf.first)))
        base = f.gep("i8", self.buffers[pf.buffer], f.binop("mul", start, LV(I64, str(pf.esize))),
                     inbounds=False)

        def line(i: LV, _: list[LV]) -> list[LV]:
            at = f.gep("i8", base, f.binop("mul", i, LV(I64, str(LINE))), inbounds=False)
            f.intrinsic("llvm.prefetch.p0", "void", [at, LV("i32", "0"), LV("i32", "2"), LV("i32", "1")])
            return []

        self._region().for_range(0, pf.lines - 1, [], line, hint="prefetch")

    def _region(self) -> RegionLowering:
        rl = RegionLowering(self.ml, self.fn, self.buffers)
        rl.ids = {}
        rl.redirect = self.redirect
        return rl

    def _stream_out(self, s: StreamedOutput, stage: LV, offset: LV) -> None:
        """The block's part of output `s`, staged at `stage`, copied to the output in CHUNK-byte
        vectors: non-temporal stores where the part starts on a CHUNK boundary, else plain ones."""
        f, vty = self.fn, f"<{CHUNK} x i8>"
        dst = f.gep("i8", self.buffers[s.buffer], f.binop("mul", offset, LV(I64, str(s.esize))))
        start = f.binop("and", f.cast("ptrtoint", dst, I64), LV(I64, str(CHUNK - 1)))
        streamed, plain, join = f.new_block("stream"), f.new_block("unaligned"), f.new_block("streamed")
        f.cbr(f.icmp("eq", start, LV(I64, "0")), streamed, plain)
        nontemporal = self.ml.module.metadata("!{i32 1}")
        for label, tail in ((streamed, f"align {CHUNK}, !nontemporal {nontemporal}"), (plain, "align 1")):
            f.set_block(label)

            def chunk(i: LV, _: list[LV], tail: str = tail) -> list[LV]:
                value = f.load(vty, f.gep(vty, stage, i), CHUNK)
                f.emit(f"store {value}, {f.gep(vty, dst, i)}, {tail}")
                return []

            self._region().for_range(0, s.length * s.esize // CHUNK - 1, [], chunk, hint="chunk")
            f.br(join)
        f.set_block(join)

    def _delinearize(self, linear: LV, sizes: tuple[int, int, int], prefix: str) -> dict[str, LV]:
        f = self.fn
        out, rest = {}, linear
        for dim, n in zip(_DIMS, sizes):
            out[f"{prefix}_{dim}"] = f.binop("urem", rest, LV(I64, str(n))) if n > 1 else LV(I64, "0")
            rest = f.binop("udiv", rest, LV(I64, str(n))) if n > 1 else rest
        return out

    def _allocate_spills(self) -> None:
        n = self.kernel.num_threads
        for q, ops in enumerate(self.phases):
            for v in _uses(ops):
                p = self.def_phase.get(id(v))
                if p is None or p == q or id(v) in self.spills:
                    continue
                if self.rematerializable(self.def_op[id(v)]):
                    continue
                self.spills[id(v)] = self.fn.alloca(f"[{n} x {mem_type(llvm_type(v.type))}]")
        for ops in self.phases:  # shuffle results always live in arrays (their scratch)
            if ops[0].name == "shuffle_reduce":
                for r in ops[0].results:
                    if id(r) not in self.spills:
                        self.spills[id(r)] = self.fn.alloca(f"[{n} x {mem_type(llvm_type(r.type))}]")

    def _slot(self, v: Value, t: LV) -> LV:
        return self.fn.gep(mem_type(llvm_type(v.type)), self.spills[id(v)], t)

    def _enter_thread(self, t: LV, phase: int, needed: list[Value], ids: dict[str, LV] | None = None
                      ) -> RegionLowering:
        rl = self._region()
        rl.ids = dict(self.block_ids, **(ids or self._delinearize(t, self.kernel.block, "th")))
        for v in needed:
            self._materialize(rl, v, t, phase)
        return rl

    def _materialize(self, rl: RegionLowering, v: Value, t: LV, phase: int) -> None:
        """Make a value of an earlier phase available: reload it, or recompute it and its inputs."""
        p = self.def_phase.get(id(v))
        if p is None or p == phase or id(v) in rl.env:
            return
        if id(v) in self.spills:
            rl.env[id(v)] = load_value(self.fn, llvm_type(v.type), self._slot(v, t))
            return
        op = self.def_op[id(v)]
        for operand in op.operands:
            self._materialize(rl, operand, t, phase)
        rl.lower_op(op)

    def _thread_phase(self, p: int, ops: list[Op]) -> None:
        needed = _uses(ops)
        group = loop_id = None
        if sum(ops[0].name != "shuffle_reduce" for ops in self.phases) <= MAX_PARALLEL_PHASES:
            interleave = MATH_INTERLEAVE if _heavy_math(ops) else None
            group, loop_id = parallel_loop_metadata(self.ml.module, interleave)

        def body(t: LV, ids: dict[str, LV] | None) -> None:
            self.fn.access_group = group
            try:
                rl = self._enter_thread(t, p, needed, ids)
                for op in ops:
                    rl.lower_op(op)
                    for r in op.results:
                        if id(r) in self.spills:
                            store_value(self.fn, rl.v(r), self._slot(r, t))
            finally:
                self.fn.access_group = None

        bx, by, bz = self.kernel.block
        loop = self._region()
        stride = self._lane0_phase_stride(ops)
        if stride:
            loop.for_range(0, self.kernel.num_threads // stride - 1, [],
                           lambda k, _: body(self.fn.binop("mul", k, LV(I64, str(stride))), None) or [],
                           hint="lane0")
            return
        if bx < NEST_MIN_X or by * bz == 1:
            loop.for_range(0, bx * by * bz - 1, [], lambda t, _: body(t, None) or [], hint="t",
                           loop_md=loop_id)
            return
        # A 2-d or 3-d block as a loop over its rows (y, z) around a loop over x: the thread id x
        # is then the inner induction variable, so loads indexed by it are consecutive and the
        # vectorizer runs lanes of x (a flat loop over t = x + bx * y made x = t mod bx: gathers).
        f = self.fn

        def row(yz: LV, iters: list[LV]) -> list[LV]:
            ids = {"th_y": f.binop("urem", yz, LV(I64, str(by))) if by > 1 else LV(I64, "0"),
                   "th_z": f.binop("udiv", yz, LV(I64, str(by))) if bz > 1 else LV(I64, "0")}
            base = f.binop("mul", yz, LV(I64, str(bx)))

            def lane(x: LV, _: list[LV]) -> list[LV]:
                body(f.binop("add", base, x), dict(ids, th_x=x))
                return []

            loop.for_range(0, bx - 1, [], lane, hint="tx", loop_md=loop_id)
            return []

        loop.for_range(0, by * bz - 1, [], row, hint="tyz")

    def _lane0_phase_stride(self, ops: list[Op]) -> int | None:
        """M when the phase does nothing but, in threads t with t % M == 0 (`lane0_stride`), what
        an `if` holds: its other ops pure, with no result a later phase reloads, and the `if`
        without results or an else branch. The phase then runs those threads alone (the
        reduction emitters' "lane 0 stores the warp's partial", a vectorized loop over all 128
        threads with a masked store a lane, was 10% of the bf16 softmax on one AVX2 core)."""
        (guard, *more) = [op for op in ops if op.regions or OP_SPECS[op.name].kind != "pure"] or [None]
        if guard is None or more or guard.name != "if" or guard.results:
            return None
        if any(o.name != "yield" for o in guard.regions[1].ops):
            return None
        if any(id(r) in self.spills for op in ops for r in op.results):
            return None
        m = lane0_stride(self.kernel, guard.operands[0])
        ok = m and self.kernel.block[0] % m == 0 and self.kernel.num_threads % m == 0
        return m if ok else None

    def _parallel_loop(self) -> tuple[str, str]:
        return parallel_loop_metadata(self.ml.module)


def lower_to_host(kernel: Kernel, verify: bool = True) -> str:
    """LLVM IR text of `kernel` for the host (see the module docstring for the ABI)."""
    if verify:
        verify_kernel(kernel)
    try:
        return _KernelLowering(kernel).lower()
    except LoweringError:
        raise
    except (KeyError, ValueError) as err:
        raise LoweringError(f"kernel @{kernel.name}: cannot lower for the host: {err}") from err
