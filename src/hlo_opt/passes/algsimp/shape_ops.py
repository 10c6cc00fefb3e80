"""AlgebraicSimplifier rewrites of broadcast, reshape and transpose (XLA's HandleBroadcast,
HandleReshape, HandleTranspose), in XLA's order; bitcast, copy, reverse, iota and constant are in
`data_ops`.

In layout-sensitive mode reshapes, transposes and copies that keep every element at its physical
offset become bitcasts (XLA's ReshapeIsBitcast / TransposeIsBitcast); rewrites that would build a
reshape of arbitrary layout, and the nested-reverse and degenerate-broadcast rewrites, decline.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape
from hlo_opt.passes.algsimp.base import (
    Rewriter, compose_permutations, inverse_permutation, is_identity_permutation, rewrite,
    swapped_precision,
)
from hlo_opt.passes.algsimp.shapes import (
    drop_degenerate, inserted_or_deleted_1sized_dimensions, reshape_is_bitcast,
    reshape_leaves_dimensions_unmodified, transpose_is_bitcast,
)


def dims_of(instr: HloInstruction) -> tuple[int, ...]:
    return tuple(instr.attrs.get("dimensions", ()))


def merely_inserts_or_deletes_1s(reshape: HloInstruction):
    """XLA's ReshapeMerelyInsertsOrDeletes1SizedDimensions: (deleted, inserted) or None."""
    if reshape.opcode != "reshape":
        return None
    return inserted_or_deleted_1sized_dimensions(reshape.operands[0].shape.dims, reshape.shape.dims)


# -- broadcast -------------------------------------------------------------------------------------
@rewrite("broadcast")
def broadcast_to_reshape(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBroadcast: a broadcast with sorted dimensions that adds no elements is a reshape."""
    operand = instr.operands[0]
    dims = dims_of(instr)
    if list(dims) != sorted(dims) or instr.shape.num_elements != operand.shape.num_elements:
        return False
    return rw.replace_with_new(instr, "reshape", [operand])


@rewrite("broadcast")
def broadcast_to_transpose(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBroadcast: a same-rank broadcast that adds no elements is a transpose."""
    operand = instr.operands[0]
    if instr.shape.rank != operand.shape.rank or instr.shape.num_elements != operand.shape.num_elements:
        return False
    perm = inverse_permutation(dims_of(instr))
    return rw.replace_with_new(instr, "transpose", [operand], {"dimensions": tuple(perm)})


@rewrite("broadcast")
def broadcast_of_degenerate_reshape(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBroadcast: broadcast(reshape(x)) where the reshape only inserts size-1 dimensions =>
    broadcast(x), dropping those dimensions from the broadcast's mapping."""
    operand = instr.operands[0]
    degenerate = merely_inserts_or_deletes_1s(operand)
    if degenerate is None or degenerate[0]:
        return False
    dims = [d for k, d in enumerate(dims_of(instr)) if k not in set(degenerate[1])]
    return rw.replace_with_new(instr, "broadcast", [operand.operands[0]], {"dimensions": tuple(dims)})


def _sinkable_operand(user_operand: HloInstruction, bcast: HloInstruction) -> bool:
    if user_operand.opcode != "broadcast":
        return False
    if user_operand.operands[0].shape.rank == 0:
        return True
    return user_operand.operands[0].shape == bcast.operands[0].shape \
        and dims_of(user_operand) == dims_of(bcast)


def _sink_into(user: HloInstruction, bcast: HloInstruction, rw: Rewriter) -> None:
    small = bcast.operands[0].shape
    new_operands = []
    for o in user.operands:
        if o.operands[0].shape.rank == 0:
            scalar_shape = small.with_element_type(o.shape.element_type)
            new_operands.append(rw.broadcast(o.operands[0], scalar_shape, ()))
        else:
            new_operands.append(o.operands[0])
    narrow = rw.clone(user, new_operands, small.with_element_type(user.shape.element_type))
    wide = rw.broadcast(narrow, user.shape, dims_of(bcast))
    rw.replace_uses(user, wide)


@rewrite("broadcast")
def broadcast_sink_past_elementwise(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBroadcast (TryToSinkBroadcastAfterElementwiseOps): an elementwise user whose operands
    are all this broadcast, equal broadcasts or scalar broadcasts runs on the small shape and is
    broadcast afterwards: add(bcast(x), bcast(c)) => bcast(add(x, bcast'(c))). Not into copies or
    fusions."""
    if not rw.opts.enable_sink_broadcast or instr.shape.rank == 0:
        return False
    changed = False
    for user in list(instr.users):
        if id(user) in rw.dead or user.opcode in ("copy", "fusion") or not is_elementwise(user.opcode) \
                or user.control_predecessors or user.control_successors:
            continue
        if all(_sinkable_operand(o, instr) for o in user.operands):
            _sink_into(user, instr, rw)
            changed = True
    return changed


_PERMUTING = frozenset({"reshape", "reverse", "transpose"})


def _takes_only_elements_of(user: HloInstruction, operand: HloInstruction) -> bool:
    """XLA's OutputIsPermutationOfOperandElements / OutputIsSubsetOfOperandElements."""
    if user.opcode in _PERMUTING or (user.opcode == "sort" and not user.shape.is_tuple):
        return True
    if user.opcode in ("slice", "dynamic-slice"):
        return user.operands[0] is operand and sum(o is operand for o in user.operands) == 1
    return False


@rewrite("broadcast")
def broadcast_scalar_through_permuting_user(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBroadcast: a user of a scalar broadcast that only permutes or selects elements
    (reshape, transpose, reverse, sort, slice, dynamic-slice) becomes a broadcast of the scalar."""
    operand = instr.operands[0]
    if operand.shape.rank != 0:
        return False
    for user in instr.users:
        if id(user) in rw.dead or not (user.users or user.is_root) \
                or user.control_predecessors or user.control_successors:
            continue
        if _takes_only_elements_of(user, instr):
            rw.replace_uses(user, rw.broadcast(operand, user.shape, ()))
            return True
    return False


@rewrite("broadcast")
def broadcast_of_iota(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBroadcast: broadcast(iota) => iota along the broadcast's image of the iota dimension."""
    operand = instr.operands[0]
    if operand.opcode != "iota":
        return False
    dim = dims_of(instr)[operand.attrs["iota_dimension"]]
    return rw.replace_with_new(instr, "iota", [], {"iota_dimension": dim})


@rewrite("broadcast")
def broadcast_of_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBroadcast: broadcast(broadcast(x)) => one broadcast with the composed dimensions."""
    operand = instr.operands[0]
    if operand.opcode != "broadcast" or operand.shape.rank == 0:
        return False
    dims = dims_of(instr)
    composed = tuple(dims[d] for d in dims_of(operand))
    return rw.replace_with_new(instr, "broadcast", [operand.operands[0]], {"dimensions": composed})


@rewrite("broadcast")
def broadcast_drop_degenerate_operand_dims(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBroadcast (layout insensitive): broadcast(x) with size-1 dimensions in x =>
    broadcast(reshape(x)) without them."""
    operand = instr.operands[0]
    if rw.opts.is_layout_sensitive or not rw.opts.enable_broadcast_degenerate_dimension \
            or operand.shape.rank == 0 or 1 not in operand.shape.dims:
        return False
    squeezed = rw.reshape(operand, drop_degenerate(operand.shape.dims))
    dims = tuple(d for d, size in zip(dims_of(instr), operand.shape.dims) if size != 1)
    return rw.replace_with_new(instr, "broadcast", [squeezed], {"dimensions": dims})


# -- reshape ---------------------------------------------------------------------------------------
@rewrite("reshape")
def reshape_of_zero_elements(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReshape: a reshape to a zero-element shape is an empty constant."""
    if instr.shape.num_elements != 0 or instr.operands[0].opcode == "constant":
        return False
    empty = np.zeros(instr.shape.dims, instr.shape.element_type.np_dtype)
    return rw.replace(instr, rw.add("constant", [], instr.shape, literal=empty))


@rewrite("reshape")
def reshape_is_noop(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReshape: a reshape to the operand's own shape (SameShape) is removed."""
    operand = instr.operands[0]
    return rw.same_shape(instr.shape, operand.shape) and rw.replace(instr, operand)


@rewrite("reshape")
def reshape_of_reshape(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReshape: reshape(reshape(x)) => reshape(x)."""
    operand = instr.operands[0]
    return operand.opcode == "reshape" and rw.replace_with_new(instr, "reshape", [operand.operands[0]])


@rewrite("reshape")
def reshape_of_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReshape: reshape(broadcast(x)) => broadcast(x) when the reshape leaves every dimension
    that x maps to unmodified."""
    operand = instr.operands[0]
    if operand.opcode != "broadcast":
        return False
    dims = reshape_leaves_dimensions_unmodified(operand.shape.dims, instr.shape.dims, dims_of(operand))
    if dims is None:
        return False
    return rw.replace_with_new(instr, "broadcast", [operand.operands[0]], {"dimensions": tuple(dims)})


@rewrite("reshape")
def reshape_of_iota(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReshape: reshape(iota) => iota, or a mixed-radix sum of iotas when the iota dimension
    splits: s32[2,3] reshape(s32[6] iota) => iota(dim 1) + 3 * iota(dim 0)."""
    from hlo_opt.passes.algsimp.shapes import common_factors

    iota = instr.operands[0]
    if iota.opcode != "iota":
        return False
    dim = iota.attrs["iota_dimension"]
    cf = common_factors(iota.shape.dims, instr.shape.dims)
    start = next((k for k, (a, b) in enumerate(cf) if a == dim and b < instr.shape.rank
                  and instr.shape.dims[b] > 1), None)
    if start is None or start + 1 >= len(cf) or not any(a == dim + 1 for a, _ in cf):
        return False
    total, multiplier = None, 1
    for d in range(cf[start + 1][1] - 1, cf[start][1] - 1, -1):
        part = rw.add("iota", [], instr.shape, {"iota_dimension": d})
        if total is not None:
            part = rw.binary("add", total, rw.binary("multiply", part, rw.scalar_like(instr, multiplier)))
        total = part
        multiplier *= instr.shape.dims[d]
    return rw.replace(instr, total)


@rewrite("reshape")
def reshape_of_dynamic_update_slice(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReshape (layout insensitive): reshape(dus(x, u, i...)) that only adds or drops size-1
    dimensions => dus(reshape(x), reshape(u), i'...) (zero indices for added dimensions), when the
    dus has one user and no sharding."""
    dus = instr.operands[0]
    degenerate = merely_inserts_or_deletes_1s(instr)
    if rw.opts.is_layout_sensitive or degenerate is None or dus.opcode != "dynamic-update-slice" \
            or len(dus.users) != 1 or dus.sharding is not None or dus.operands[0].sharding is not None:
        return False
    deleted, inserted = set(degenerate[0]), set(degenerate[1])
    update, indices = dus.operands[1], dus.operands[2:]
    zero = rw.scalar_like(indices[0], 0)
    sizes, new_indices = [], []
    for i in range(update.shape.rank + 1):
        if i in deleted:
            continue
        while len(sizes) in inserted:
            sizes.append(1)
            new_indices.append(zero)
        if i < update.shape.rank:
            sizes.append(update.shape.dims[i])
            new_indices.append(indices[i])
    base = rw.reshape(dus.operands[0], instr.shape.dims, instr.shape)
    return rw.replace(instr, rw.clone(dus, [base, rw.reshape(update, sizes), *new_indices], instr.shape))


def bitcasting_source(instr: HloInstruction, rw: Rewriter) -> HloInstruction | None:
    """XLA's BitcastingOperandOfReshapeOrCopyChain: the first operand up a reshape/copy chain whose
    shape `instr` can be bitcast from (layout sensitive only)."""
    if not rw.opts.is_layout_sensitive:
        return None
    operand = instr.operands[0]
    while True:
        if reshape_is_bitcast(operand.shape, instr.shape):
            return operand
        if operand.opcode not in ("reshape", "copy"):
            return None
        operand = operand.operands[0]


@rewrite("reshape")
def reshape_to_bitcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReshape (layout sensitive): a reshape (through reshapes and copies) that moves no
    element in memory becomes a bitcast."""
    source = bitcasting_source(instr, rw)
    return source is not None and rw.replace_with_new(instr, "bitcast", [source])


# -- transpose -------------------------------------------------------------------------------------
@rewrite("transpose")
def transpose_is_identity(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleTranspose: a transpose with the identity permutation is removed."""
    return is_identity_permutation(dims_of(instr)) and rw.replace(instr, instr.operands[0])


@rewrite("transpose")
def transpose_of_transpose(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleTranspose: transpose(transpose(x)) => one transpose with the composed permutation."""
    operand = instr.operands[0]
    if operand.opcode != "transpose":
        return False
    perm = compose_permutations(dims_of(operand), dims_of(instr))
    return rw.replace_with_new(instr, "transpose", [operand.operands[0]], {"dimensions": tuple(perm)})


def _canonical_dot_for_transpose(dot: HloInstruction) -> bool:
    """Batch dims first and equal on both sides, one non-contracting dim per operand."""
    lb, rb = dot.attrs.get("lhs_batch_dims", ()), dot.attrs.get("rhs_batch_dims", ())
    lc, rc = dot.attrs.get("lhs_contracting_dims", ()), dot.attrs.get("rhs_contracting_dims", ())
    lhs, rhs = dot.operands
    return tuple(lb) == tuple(rb) and sorted(lb) == list(range(len(lb))) and len(lc) > 0 and len(rc) > 0 \
        and len(lc) + len(lb) + 1 == lhs.shape.rank and len(rc) + len(rb) + 1 == rhs.shape.rank


def swapped_dot_attrs(dot: HloInstruction) -> dict:
    """The dot's attributes for dot(rhs, lhs): batch/contracting dims and precisions swapped."""
    attrs = dict(dot.attrs)
    for a, b in (("lhs_batch_dims", "rhs_batch_dims"), ("lhs_contracting_dims", "rhs_contracting_dims")):
        attrs.pop(a, None)
        attrs.pop(b, None)
        if dot.attrs.get(b):
            attrs[a] = dot.attrs[b]
        if dot.attrs.get(a):
            attrs[b] = dot.attrs[a]
    return swapped_precision(attrs)


@rewrite("transpose")
def transpose_of_dot(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleTranspose: transpose(dot(a, b)) swapping the two non-batch dimensions => dot(b, a), for
    canonical dots (batch dims first) with one user."""
    dot = instr.operands[0]
    if rw.opts.supports_non_canonical_dots or dot.opcode != "dot" or len(dot.users) != 1 \
            or not _canonical_dot_for_transpose(dot):
        return False
    rank = dot.shape.rank
    expected = list(range(rank - 2)) + [rank - 1, rank - 2]
    if list(dims_of(instr)) != expected:
        return False
    return rw.replace_with_new(instr, "dot", [dot.operands[1], dot.operands[0]], swapped_dot_attrs(dot))


@rewrite("transpose")
def transpose_of_degenerate_dims(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleTranspose: a transpose that only moves size-1 dimensions is a reshape."""
    perm = dims_of(instr)
    kept = [p for k, p in enumerate(perm) if instr.shape.dims[k] != 1]
    if len(kept) == len(perm) or kept != sorted(kept):
        return False
    return rw.replace_with_new(instr, "reshape", [instr.operands[0]])


@rewrite("transpose")
def transpose_to_bitcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleTranspose (layout sensitive): a transpose whose layouts keep the physical order is a bitcast."""
    return rw.opts.is_layout_sensitive \
        and transpose_is_bitcast(instr.operands[0].shape, instr.shape, dims_of(instr)) \
        and rw.replace_with_new(instr, "bitcast", [instr.operands[0]])


@rewrite("transpose")
def transpose_of_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleTranspose (SimplifyTransposeOfBroadcast): transpose(broadcast(x)) => broadcast(x) when
    the transpose keeps the relative order of x's dimensions (sorted broadcast dimensions)."""
    bcast = instr.operands[0]
    if bcast.opcode != "broadcast" or list(dims_of(bcast)) != sorted(dims_of(bcast)):
        return False
    inverse = inverse_permutation(dims_of(instr))
    dims = [inverse[d] for d in dims_of(bcast)]
    if dims != sorted(dims):
        return False
    if rw.opts.is_layout_sensitive \
            and not _broadcast_keeps_layout_order(bcast.operands[0].shape, instr.shape, dims):
        return False
    return rw.replace_with_new(instr, "broadcast", [bcast.operands[0]], {"dimensions": tuple(dims)})


def _broadcast_keeps_layout_order(operand: Shape, result: Shape, dims: list[int]) -> bool:
    """The new broadcast would not transpose physically: x's dims in the same minor-to-major order."""
    order_in = sorted(range(len(dims)), key=lambda k: list(operand.minor_to_major).index(k))
    extracted = [d for d in result.minor_to_major if d in dims]
    order_out = sorted(range(len(dims)), key=lambda k: extracted.index(dims[k]))
    return order_in == order_out
