"""Which shuffles only lane 0 reads: the host lowering (host.py) then computes only the lanes lane
0's result depends on.

The reduction emitters write a warp's partial result from lane 0 only (`if th_x % 32 == 0`);
`lane0_only` recognizes that pattern on the kernel IR, and `lane0_stride` gives the thread stride
of such a condition, so that the phase holding that `if` can loop over lanes 0 only.
"""

from __future__ import annotations

from hlo_codegen.kernel_ir.ir import Kernel, Op, Value


def _definitions(kernel: Kernel) -> dict[int, Op]:
    return {id(r): o for o in kernel.body.walk() for r in o.results}


def _is_op(defs: dict[int, Op], v: Value, name: str, **attrs) -> Op | None:
    o = defs.get(id(v))
    ok = o is not None and o.name == name and all(o.attrs.get(k) == a for k, a in attrs.items())
    return o if ok else None


def lane0_stride(kernel: Kernel, cond: Value, defs: dict[int, Op] | None = None) -> int | None:
    """M when `cond` is `th_x % M == 0` with M a positive multiple of 32, or `th_x == 0` (M = the
    block's x size): the thread is then lane 0 of its warp, and where M divides the block's x
    size, thread linear id t = x + bx * (y + by * z) satisfies `cond` exactly when t % M == 0.
    None for any other condition."""
    defs = _definitions(kernel) if defs is None else defs
    bx = kernel.block[0]
    cmp = _is_op(defs, cond, "cmpi", predicate="eq")
    if not cmp:
        return None
    for x, zero in (cmp.operands, cmp.operands[::-1]):
        if not _is_op(defs, zero, "constant", value=0):
            continue
        if _is_op(defs, x, "thread_id", dim="x"):
            return bx
        rem = _is_op(defs, x, "remui")
        const = rem and _is_op(defs, rem.operands[1], "constant")
        m = const.attrs.get("value") if const else None
        if (isinstance(m, int) and m > 0 and m % 32 == 0
                and _is_op(defs, rem.operands[0], "thread_id", dim="x")):
            return m
    return None


def lane0_only(kernel: Kernel, op: Op) -> bool:
    """True when every use of the shuffle_reduce `op`'s results is inside the then-branch of an
    `if` whose condition proves the thread is lane 0 of its warp (`lane0_stride`), in a block
    whose x size and thread count are multiples of 32 (the reduction emitters' "lane 0 writes
    the warp's partial" pattern)."""
    if kernel.block[0] % 32 or kernel.num_threads % 32 or int(op.attrs.get("max_distance", 16)) > 16:
        return False
    defs = _definitions(kernel)
    results = {id(r) for r in op.results}

    def uses_only_guarded(block, guarded: bool) -> bool:
        for o in block.ops:
            if not guarded and any(id(v) in results for v in o.operands):
                return False
            for i, region in enumerate(o.regions):
                inner = guarded or (o.name == "if" and i == 0
                                    and lane0_stride(kernel, o.operands[0], defs) is not None)
                if not uses_only_guarded(region, inner):
                    return False
        return True

    return uses_only_guarded(kernel.body, False)
