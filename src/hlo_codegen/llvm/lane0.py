"""Which shuffles only lane 0 reads: the host lowering (host.py) then computes only the lanes lane
0's result depends on.

The reduction emitters write a warp's partial result from lane 0 only (`if th_x % 32 == 0`);
`lane0_only` recognizes that pattern on the kernel IR.
"""

from __future__ import annotations

from hlo_codegen.kernel_ir.ir import Kernel, Op, Value


def lane0_only(kernel: Kernel, op: Op) -> bool:
    """True when every use of the shuffle_reduce `op`'s results is inside the then-branch of an
    `if` whose condition proves the thread is lane 0 of its warp: `th_x == 0` or
    `th_x % (32 k) == 0`, in a block whose x size and thread count are multiples of 32 (the
    reduction emitters' "lane 0 writes the warp's partial" pattern)."""
    if kernel.block[0] % 32 or kernel.num_threads % 32 or int(op.attrs.get("max_distance", 16)) > 16:
        return False
    defs = {id(r): o for o in kernel.body.walk() for r in o.results}
    results = {id(r) for r in op.results}

    def is_op(v: Value, name: str, **attrs) -> Op | None:
        o = defs.get(id(v))
        ok = o is not None and o.name == name and all(o.attrs.get(k) == a for k, a in attrs.items())
        return o if ok else None

    def lane_zero(v: Value) -> bool:  # x is a multiple of 32 when v == 0
        if is_op(v, "thread_id", dim="x"):
            return True
        rem = is_op(v, "remui")
        const = rem and is_op(rem.operands[1], "constant")
        return bool(const and is_op(rem.operands[0], "thread_id", dim="x")
                    and isinstance(const.attrs.get("value"), int) and const.attrs["value"] % 32 == 0
                    and const.attrs["value"] > 0)

    def says_lane0(cond: Value) -> bool:
        cmp = is_op(cond, "cmpi", predicate="eq")
        return bool(cmp) and any(is_op(z, "constant", value=0) and lane_zero(x)
                                 for x, z in (cmp.operands, cmp.operands[::-1]))

    def uses_only_guarded(block, guarded: bool) -> bool:
        for o in block.ops:
            if not guarded and any(id(v) in results for v in o.operands):
                return False
            for i, region in enumerate(o.regions):
                inner = guarded or (o.name == "if" and i == 0 and says_lane0(o.operands[0]))
                if not uses_only_guarded(region, inner):
                    return False
        return True

    return uses_only_guarded(kernel.body, False)
