"""The partitioner's handlers for gather and scatter (XLA's gather_scatter_handler.cc in
xla/service/spmd/).

gather, the cheaper (bytes each device sends) of:
- passthrough: the result in its wanted tiling, restricted to the dims a tiling can reach
  (offset dims from passthrough operand dims, batch dims from the indices' dims); operand and
  indices resharded to match, the gather local, no collective (an embedding lookup with the
  indices split by batch);
- trivially sliced operand: the operand stays split along a dim indexed by size-1 slices (a
  vocabulary-parallel table); each device looks up the indices shifted by its first row,
  zeroes the rows it does not hold, and an all-reduce sums the pieces.
scatter: the operand split along passthrough dims (updates split to match) and along trivially
sliced dims (each device applies the updates shifted by its first row; the others fall outside
its tile and scatter skips them), indices replicated; local, no collective. Or, for a
scatter-add whose updates are split along their scatter dims (the gradient of an embedding
lookup over a split batch), when it sends fewer bytes than gathering them: each device scatters
its updates into zeros, one all-reduce sums the pieces, and the operand is added.
"""

from __future__ import annotations

from hlo_common.hlo.attributes import SliceSpec
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.hlo_creation_utils import make_constant
from hlo_common.hlo.ir import HloInstruction
from hlo_opt.spmd.gather_dims import Dims, dims_of, inverse, project
from hlo_opt.spmd.reshard import reshard_cost
from hlo_opt.spmd.tiling import Tiling


def _elements(dims) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out


def handle_gather(p, instr: HloInstruction) -> bool:
    dims = dims_of(instr)
    if dims is None:
        return False
    operand, indices = instr.operands
    want, have = p.wanted(instr), p.values[operand][1]
    rank = instr.shape.rank
    reachable = list(dims.operand_to_out.values()) + list(dims.indices_to_out.values())
    out_a = project(want, {d: d for d in reachable}, rank)
    need_op = project(want, inverse(dims.operand_to_out), operand.shape.rank)
    need_idx = project(want, inverse(dims.indices_to_out), indices.shape.rank)
    idx_have = p.values[indices][1]
    cost_a = reshard_cost(operand.shape.dims, have, need_op) \
        + reshard_cost(indices.shape.dims, idx_have, need_idx)
    trivial = [d for d in dims.trivial if have.tiles[d] > 1]
    passthrough_only = all(have.tiles[d] == 1 or d in dims.operand_to_out or d in trivial
                           for d in range(operand.shape.rank))
    if trivial and passthrough_only and have.local_dims(operand.shape.dims) is not None:
        best = None
        for idx_t, out, groups in _trivial_layouts(p, instr, dims, have, trivial, want):
            local_out = _elements(instr.shape.dims) / out.num_tiles
            g = len(groups[0])
            cost = reshard_cost(indices.shape.dims, idx_have, idx_t) + 2 * local_out * (g - 1) / g \
                + reshard_cost(instr.shape.dims, out, want)
            if best is None or cost < best[0]:
                best = (cost, idx_t, out, groups)
        if best is not None and best[0] < cost_a:
            return _gather_trivial(p, instr, dims, have, trivial, *best[1:])
    if any(t.local_dims(s.dims) is None for t, s in
           ((need_op, operand.shape), (need_idx, indices.shape), (out_a, instr.shape))):
        return False
    x, idx = p.get(operand, need_op), p.get(indices, need_idx)
    p.values[instr] = (_local_gather(p, instr, x, idx, need_op, out_a), out_a)
    return True


def _local_gather(p, instr, x, idx, operand_tiling: Tiling, out: Tiling) -> HloInstruction:
    full = instr.operands[0].shape.dims  # only slices that take a whole dim take a whole tile
    sizes = tuple(s // t if s == f else s
                  for s, t, f in zip(instr.attrs["slice_sizes"], operand_tiling.tiles, full))
    attrs = dict(instr.attrs)
    attrs["slice_sizes"] = sizes
    return p.b.add("gather", [x, idx], p.local(instr.shape, out, instr), attrs)


def _trivial_layouts(p, instr, dims: Dims, have: Tiling, trivial: list[int], want: Tiling):
    """(indices' tiling, result's tiling, all-reduce groups) for looking up rows where the
    table is split along trivially sliced dims: indices replicated (the result tiled as the
    table's passthrough dims), or, with no passthrough dim split, indices kept split along the
    batch dims the result wants (a data-parallel batch over a vocabulary-split table), each
    batch tile's devices summing the rows they hold."""
    indices = instr.operands[1]
    rank = instr.shape.rank
    yield p.replicated(indices.shape), project(have, dims.operand_to_out, rank), have.groups(trivial)
    if any(have.tiles[d] > 1 for d in dims.operand_to_out):
        return
    out = project(want, {d: d for d in dims.indices_to_out.values()}, rank)
    idx_t = project(want, inverse(dims.indices_to_out), indices.shape.rank)
    if out.is_replicated or out.local_dims(instr.shape.dims) is None \
            or idx_t.local_dims(indices.shape.dims) is None:
        return
    groups = _one_of_each(out, have, trivial)
    if groups is not None:
        yield idx_t, out, groups


def _one_of_each(out: Tiling, have: Tiling, trivial: list[int]) -> list[list[int]] | None:
    """Groups of devices that hold the same result tile and, between them, each table tile
    along `trivial` once; None where the devices of a result tile do not hold the table tiles
    evenly."""
    tiles = _elements(have.tiles[d] for d in trivial)
    groups = []
    for row in out.ids.reshape(-1, out.ids.shape[-1]):
        classes: dict = {}
        for dev in row:
            classes.setdefault(tuple(int(have.coords[dev, d]) for d in trivial), []).append(int(dev))
        sizes = {len(v) for v in classes.values()}
        if len(classes) != tiles or len(sizes) != 1:
            return None
        groups += [[classes[c][k] for c in sorted(classes)] for k in range(sizes.pop())]
    return groups


def _gather_trivial(p, instr, dims: Dims, have: Tiling, trivial: list[int], idx_t: Tiling, out: Tiling,
                    groups: list[list[int]]) -> bool:
    operand, indices = instr.operands
    x = p.get(operand, have)
    idx = p.get(indices, idx_t)
    local_rows = have.local_dims(operand.shape.dims)
    valid = None
    for d in trivial:
        first = [int(c) * local_rows[d] for c in have.coords[:, d]]
        idx, inside = shift_indices(p, idx, instr.attrs["index_vector_dim"], dims.index_component[d],
                                    first, local_rows[d], operand.shape.dims[d] - 1)
        valid = inside if valid is None else p.b.add("and", [valid, inside], inside.shape)
    got = _local_gather(p, instr, x, idx, have, out)
    batch = sorted(dims.indices_to_out.values())
    mask = p.b.add("broadcast", [valid], got.shape.with_element_type(valid.shape.element_type),
                   {"dimensions": tuple(batch)})
    zero = p.b.add("broadcast", [_scalar(p, got, 0)], got.shape, {"dimensions": ()})
    got = p.b.add("select", [mask, got, zero], got.shape)
    add = p.b.reducer("add", got.shape.element_type)
    got = p.b.all_reduce(got, sorted(groups), add)
    p.values[instr] = (got, out)
    return True


def _scalar(p, like, value):
    return make_constant(p.b.comp, value, like.shape.element_type)


def shift_indices(p, idx, ivd: int, component: int, first: list[int], rows: int, clamp_to: int | None):
    """(indices with component `component` lowered by first[device], pred over the batch dims:
    whether the shifted component lies in [0, rows)). With `clamp_to`, the component is first
    clamped to [0, clamp_to] as a gather clamps it on the whole operand."""
    et = idx.shape.element_type
    base = p.b.per_partition(first)
    if et != base.shape.element_type:
        base = p.b.add("convert", [base], base.shape.with_element_type(et))
    batch_dims = tuple(n for k, n in enumerate(idx.shape.dims) if k != ivd)
    comp = idx
    if ivd < idx.shape.rank:
        spec = SliceSpec(tuple((component, component + 1, 1) if k == ivd else (0, n, 1)
                               for k, n in enumerate(idx.shape.dims)))
        one = tuple(1 if k == ivd else n for k, n in enumerate(idx.shape.dims))
        comp = p.b.add("slice", [idx], idx.shape.with_dims(one), {"slice": spec})
        comp = p.b.add("reshape", [comp], idx.shape.with_dims(batch_dims))
    if clamp_to is not None:
        comp = p.b.add("clamp", [_scalar(p, comp, 0), comp, _scalar(p, comp, clamp_to)], comp.shape)
    spread_base = p.b.add("broadcast", [base], comp.shape, {"dimensions": ()})
    shifted = p.b.add("subtract", [comp, spread_base], comp.shape)
    pred = comp.shape.with_element_type(PRIMITIVE_TYPES["pred"])

    def bound(v):
        return p.b.add("broadcast", [_scalar(p, comp, v)], comp.shape, {"dimensions": ()})
    inside = p.b.add("and", [p.b.add("compare", [shifted, bound(0)], pred, {"direction": "GE"}),
                             p.b.add("compare", [shifted, bound(rows)], pred, {"direction": "LT"})], pred)
    if ivd >= idx.shape.rank or idx.shape.dims[ivd] == 1:
        return p.b.add("reshape", [shifted], idx.shape), inside
    keep = tuple(k for k in range(idx.shape.rank) if k != ivd)
    spread = p.b.add("broadcast", [shifted], idx.shape, {"dimensions": keep})
    s32 = idx.shape.with_element_type(PRIMITIVE_TYPES["s32"])
    iota = p.b.add("iota", [], s32, {"iota_dimension": ivd})
    k = p.b.add("broadcast", [_scalar(p, iota, component)], s32, {"dimensions": ()})
    pred_shape = idx.shape.with_element_type(PRIMITIVE_TYPES["pred"])
    on = p.b.add("compare", [iota, k], pred_shape, {"direction": "EQ"})
    return p.b.add("select", [on, spread, idx], idx.shape), inside


def handle_scatter(p, instr: HloInstruction) -> bool:
    dims = dims_of(instr)
    if dims is None or len(instr.operands) != 3 or instr.shape.is_tuple:
        return False
    operand, indices, updates = instr.operands
    keep = set(dims.operand_to_out) | set(dims.trivial)
    need = project(p.wanted(instr), {d: d for d in keep}, operand.shape.rank)
    need_upd = project(need, dims.operand_to_out, updates.shape.rank)
    even = need.local_dims(operand.shape.dims) is not None \
        and need_upd.local_dims(updates.shape.dims) is not None
    replicated_idx = p.replicated(indices.shape)
    cost = reshard_cost(operand.shape.dims, p.values[operand][1], need) \
        + reshard_cost(updates.shape.dims, p.values[updates][1], need_upd) \
        + reshard_cost(indices.shape.dims, p.values[indices][1], replicated_idx)
    split = _batch_split(p, instr, dims)
    if split is not None and (not even or split[0] < cost):
        return _scatter_batch(p, instr, *split[1:])
    if not even:
        return False
    x, upd = p.get(operand, need), p.get(updates, need_upd)
    idx = p.get(indices, replicated_idx)
    local_rows = need.local_dims(operand.shape.dims)
    for d in dims.trivial:
        if need.tiles[d] > 1:
            first = [int(c) * local_rows[d] for c in need.coords[:, d]]
            idx, _inside = shift_indices(p, idx, instr.attrs["index_vector_dim"], dims.index_component[d],
                                         first, local_rows[d], None)
    new = p.b.add("scatter", [x, idx, upd], p.local(instr.shape, need, instr), dict(instr.attrs))
    p.values[instr] = (new, need)
    return True


def _batch_split(p, instr, dims: Dims):
    """(cost, updates' tiling, indices' tiling) for a scatter-add whose updates stay split along
    their scatter dims (an embedding's gradient from a split batch): each device scatters its
    updates into zeros, an all-reduce sums the pieces, the operand is added. None otherwise."""
    operand, indices, updates = instr.operands
    root = instr.attrs["to_apply"].root
    if root.opcode != "add" or any(o.opcode != "parameter" for o in root.operands):
        return None
    have = p.values[updates][1]
    scatter_dims = list(dims.indices_to_out.values())
    upd_t = project(have, {d: d for d in scatter_dims}, updates.shape.rank)
    if upd_t.is_replicated:
        return None
    idx_t = project(upd_t, inverse(dims.indices_to_out), indices.shape.rank)
    groups = upd_t.num_tiles
    cost = reshard_cost(updates.shape.dims, have, upd_t) \
        + reshard_cost(indices.shape.dims, p.values[indices][1], idx_t) \
        + reshard_cost(operand.shape.dims, p.values[operand][1], p.replicated(operand.shape)) \
        + 2 * _elements(operand.shape.dims) * (groups - 1) / groups
    return cost, upd_t, idx_t


def _scatter_batch(p, instr, upd_t: Tiling, idx_t: Tiling) -> bool:
    operand, indices, updates = instr.operands
    whole = p.replicated(operand.shape)
    zeros = p.b.add("broadcast", [make_constant(p.b.comp, 0, operand.shape.element_type)], operand.shape,
                    {"dimensions": ()})
    parts = p.b.add("scatter", [zeros, p.get(indices, idx_t), p.get(updates, upd_t)], operand.shape,
                    dict(instr.attrs))
    tiled = [d for d in range(upd_t.rank) if upd_t.tiles[d] > 1]
    total = p.b.all_reduce(parts, upd_t.groups(tiled), instr.attrs["to_apply"])
    p.values[instr] = (p.b.add("add", [p.get(operand, whole), total], operand.shape), whole)
    return True


HANDLERS = {"gather": handle_gather, "scatter": handle_scatter}
