"""Interpreter handlers for sort and topk (XLA's HloEvaluator::HandleSort / HandleTopK).

sort permutes N same-shaped operands along `dimensions={d}` by a comparator computation over
2N scalars (parameters 2i and 2i+1 are operand i's lhs and rhs). Two paths:

- fast: the comparator is one `compare` LT/GT of the same elementwise function of operand k's two
  parameters (often just the parameters themselves). Keys become numpy-sortable (TOTALORDER
  floats map to integers ordered -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN, as XLA's total
  order) and one stable `np.argsort` gives the permutation.
- general: any comparator, through a bitonic sorting network whose every stage calls the
  comparator once per direction over all rows and pairs at once (`ev.map_computation`). Ties are
  broken by original position, so the result is the stable sort XLA produces.

topk returns (values, s32 indices) of the k largest (or smallest) along the last dim, in XLA's
total order, ties by lower index.
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter.numeric import bool_attr, ints_attr, unsupported
from hlo_common.interpreter.registry import HANDLERS, register
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.opcodes import is_elementwise


def total_order_keys(x: np.ndarray) -> np.ndarray:
    """Integers ordered like XLA's floating-point total order (NaNs by sign, -0 before +0)."""
    if x.dtype == np.float64:
        bits = x.view(np.int64)
        return np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)
    bits = np.asarray(x).astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(bits < 0, bits ^ np.int64(0x7FFFFFFF), bits)


def _sort_keys(x: np.ndarray, compare_type: str) -> np.ndarray:
    kind = x.dtype.kind
    if kind == "b":
        return x.astype(np.int64)
    if kind in "iu":
        return x if x.dtype.itemsize == 8 else x.astype(np.int64)
    if compare_type == "TOTALORDER":
        return total_order_keys(x)
    if x.dtype == np.float64:
        return x
    return x.astype(np.float32)  # bf16 / f16 / f8 compare exactly as f32


def _descending(keys: np.ndarray) -> np.ndarray:
    """Keys whose ascending order is `keys`' descending order (equal keys stay equal)."""
    if keys.dtype.kind in "iu":
        return ~keys
    return -keys  # floats: NaNs stay last, -0 and +0 stay equal


def _key_comparator(comp: HloComputation):
    """(operand k, descending, compare type, key root) when the comparator is
    `compare(key(lhs_k), key(rhs_k))` LT/GT for one elementwise function `key` of operand k's two
    parameters (jax canonicalizes -0 and NaNs this way before a TOTALORDER compare), else None."""
    root = comp.root
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    direction = str(root.attrs.get("direction", ""))
    a, b = root.operands
    pa, pb = _parameters_of(a), _parameters_of(b)
    if direction not in ("LT", "GT") or pa is None or pb is None or len(pa) != 1 or len(pb) != 1:
        return None
    i, j = next(iter(pa)), next(iter(pb))
    if i // 2 != j // 2 or i == j or a.shape.element_type.is_complex or not _same_function(a, b, i, j, {}):
        return None
    descending = (direction == "GT") == (i < j)
    key = a if i < j else b
    etype = key.shape.element_type
    default = "FLOAT" if etype.is_float else ("UNSIGNED" if etype.kind == "unsigned" else "SIGNED")
    return i // 2, descending, str(root.attrs.get("type", default)), key


def _parameters_of(instr: HloInstruction) -> set[int] | None:
    """Parameter numbers an elementwise scalar subgraph reads (None if it has other ops)."""
    found: set[int] = set()
    stack, seen = [instr], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.opcode == "parameter":
            found.add(x.parameter_number)
        elif x.opcode != "constant" and not is_elementwise(x.opcode):
            return None
        stack.extend(x.operands)
    return found


def _same_function(a: HloInstruction, b: HloInstruction, pa: int, pb: int, memo: dict) -> bool:
    """a (reading parameter pa) and b (reading pb) compute the same function of their parameter."""
    key = (id(a), id(b))
    if key not in memo:
        memo[key] = False
        if a.opcode == "parameter" or b.opcode == "parameter":
            same = a.opcode == b.opcode and (a.parameter_number, b.parameter_number) == (pa, pb)
        elif a.opcode == "constant" or b.opcode == "constant":
            same = a.opcode == b.opcode and a.shape == b.shape and \
                np.asarray(a.literal).tobytes() == np.asarray(b.literal).tobytes()
        else:
            same = (a.opcode == b.opcode and a.shape == b.shape and a.attrs == b.attrs
                    and len(a.operands) == len(b.operands)
                    and all(_same_function(x, y, pa, pb, memo) for x, y in zip(a.operands, b.operands)))
        memo[key] = same
    return memo[key]


def _evaluate_key(key: HloInstruction, values: np.ndarray, ev) -> np.ndarray:
    """The key subgraph applied elementwise to a whole operand (its handlers broadcast)."""
    done: dict[int, np.ndarray] = {}
    order: list[HloInstruction] = []
    stack = [(key, False)]
    while stack:
        x, expanded = stack.pop()
        if expanded:
            order.append(x)
        elif id(x) not in done:
            done[id(x)] = None
            stack.append((x, True))
            stack.extend((o, False) for o in x.operands if id(o) not in done)
    with np.errstate(all="ignore"):
        for x in order:
            if x.opcode == "parameter":
                done[id(x)] = values
            elif x.opcode == "constant":
                done[id(x)] = np.asarray(x.literal)
            else:
                done[id(x)] = np.asarray(HANDLERS[x.opcode](x, [done[id(o)] for o in x.operands], ev))
    return np.broadcast_to(done[id(key)], values.shape)


@register("sort")
def _sort(instr: HloInstruction, operands, ev):
    dims = ints_attr(instr, "dimensions")
    if len(dims) != 1:
        raise unsupported(instr, f"sort needs one dimension, got {list(dims)}")
    axis = dims[0]
    comp = instr.attrs["to_apply"]
    fast = _key_comparator(comp)
    if fast is not None:
        k, descending, compare_type, key = fast
        values = operands[k]
        if key.opcode != "parameter":
            values = _evaluate_key(key, values, ev)
        keys = _sort_keys(values, compare_type)
        perm = np.argsort(_descending(keys) if descending else keys, axis=axis, kind="stable")
    else:
        perm = general_sort_permutation(list(operands), axis, comp, ev)
    out = tuple(np.take_along_axis(x, perm, axis=axis) for x in operands)
    return out if len(out) > 1 else out[0]


def general_sort_permutation(operands: list[np.ndarray], axis: int, comp: HloComputation, ev) -> np.ndarray:
    """Stable sort permutation along `axis` for any comparator, by a bitonic network."""
    rows = [np.moveaxis(x, axis, -1) for x in operands]
    moved_shape = rows[0].shape
    n = moved_shape[-1]
    flat = [r.reshape(-1, n) for r in rows]
    nrows = flat[0].shape[0]
    if n <= 1 or nrows == 0:
        perm = np.zeros(moved_shape, np.int64) + np.arange(n)
        return np.moveaxis(perm, -1, axis)
    m = 1 << (n - 1).bit_length()
    if m != n:  # pad with copies of element 0; padding sorts after everything
        flat = [np.concatenate([f, np.repeat(f[:, :1], m - n, axis=1)], axis=1) for f in flat]
    perm = np.broadcast_to(np.arange(m), (nrows, m)).copy()
    row_ix = np.arange(nrows)[:, None]

    def less(i_pos: np.ndarray, j_pos: np.ndarray) -> np.ndarray:
        i_idx, j_idx = perm[row_ix, i_pos], perm[row_ix, j_pos]
        vi = [f[row_ix, i_idx] for f in flat]
        vj = [f[row_ix, j_idx] for f in flat]
        ij = ev.map_computation(comp, [v for pair in zip(vi, vj) for v in pair])[0].astype(bool)
        ji = ev.map_computation(comp, [v for pair in zip(vj, vi) for v in pair])[0].astype(bool)
        pad_i, pad_j = i_idx >= n, j_idx >= n
        real = ij | (~ji & (i_idx < j_idx))
        return np.where(pad_i | pad_j, ~pad_i & pad_j, real)

    k = 2
    while k <= m:
        j = k // 2
        while j >= 1:
            pos = np.arange(m)
            lo = pos[(pos & j) == 0]
            hi = lo | j
            ascending = (lo & k) == 0
            lo_b = np.broadcast_to(lo, (nrows, lo.size))
            hi_b = np.broadcast_to(hi, (nrows, hi.size))
            swap = np.where(ascending, less(hi_b, lo_b), less(lo_b, hi_b))
            a, b = perm[:, lo].copy(), perm[:, hi].copy()
            perm[:, lo] = np.where(swap, b, a)
            perm[:, hi] = np.where(swap, a, b)
            j //= 2
        k *= 2
    perm = perm[:, :n].reshape(moved_shape)
    return np.moveaxis(perm, -1, axis)


@register("topk")
def _topk(instr: HloInstruction, operands, ev):
    x = operands[0]
    k = int(instr.attrs.get("k", 0))
    largest = bool_attr(instr, "largest", True)
    if x.ndim == 0 or not 0 <= k <= x.shape[-1]:
        raise unsupported(instr, f"k={k} does not fit operand shape {list(x.shape)}")
    if x.dtype.kind in "biu":
        keys = x.astype(np.int64) if x.dtype != np.uint64 else x
    elif x.dtype.kind == "c":
        raise unsupported(instr, "topk of complex values")
    else:
        keys = total_order_keys(x)
    perm = np.argsort(_descending(keys) if largest else keys, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(x, perm, axis=-1)
    return values, perm.astype(np.int32)
