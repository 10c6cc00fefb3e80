"""AlgebraicSimplifier rewrites of sort, gather, scatter, map, get-tuple-element, opt-barrier and
conditional (XLA's HandleSort, HandleGather, HandleScatter, HandleMap, HandleGetTupleElement,
HandleOptimizationBarrier, HandleConditional), in XLA's order.

Degenerate gathers and scatters become broadcasts, selects or maps; a map whose computation is a
single elementwise op becomes that op; an opt-barrier forwards only the tuple elements read after it.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_utils import has_side_effect
from hlo_opt.passes.algsimp.base import Rewriter, is_effective_scalar, is_zero_element, pred_shape, rewrite
from hlo_opt.passes.algsimp.slicing import make_slice


@rewrite("sort")
def sort_of_trivial_dimension(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSort: sorting an empty array or along a dimension of size <= 1 changes nothing."""
    x = instr.operands[0]
    if not (is_zero_element(x.shape) or x.shape.dims[instr.attrs["dimensions"][0]] <= 1):
        return False
    if len(instr.operands) == 1:
        return rw.replace(instr, x)
    return rw.replace(instr, rw.add("tuple", list(instr.operands), instr.shape))


# -- gather ----------------------------------------------------------------------------------------
@rewrite("gather")
def gather_of_zero_elements(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleGather: gathering from an empty operand gives zeros."""
    return is_zero_element(instr.operands[0].shape) and rw.replace(instr, rw.scalar_like(instr, 0))


@rewrite("gather")
def gather_of_effective_scalar(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleGather: gathering from a one-element operand is a broadcast of that element."""
    x = instr.operands[0]
    if not is_effective_scalar(x.shape):
        return False
    scalar = x if x.shape.rank == 0 else rw.reshape(x, ())
    return rw.replace(instr, rw.broadcast(scalar, instr.shape, ()))


@rewrite("gather")
def gather_of_tiny_operand(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleGather: a gather of single elements from a rank-1 operand of at most
    `very_small_gather_size` elements (implicit index vector) => a chain of selects on the index,
    which fuses better; the index clamps as in the gather."""
    x, indices = instr.operands
    n = x.shape.dims[0] if x.shape.rank == 1 else 0
    if x.shape.rank != 1 or n > rw.opts.very_small_gather_size \
            or instr.attrs.get("index_vector_dim") != indices.shape.rank \
            or len(instr.attrs.get("collapsed_slice_dims", ())) != 1:
        return False

    def value(i: int) -> HloInstruction:
        element = make_slice(rw, x, [i], [i + 1])
        return rw.broadcast(rw.reshape(element, ()), instr.shape, ())

    result = value(0)
    for i in range(n):
        mask = rw.add("compare", [indices, rw.scalar_like(indices, i)], pred_shape(instr.shape),
                      {"direction": "GE"})
        result = rw.add("select", [mask, value(i), result], instr.shape)
    return rw.replace(instr, result)


# -- scatter ---------------------------------------------------------------------------------------
def _scatter_parts(instr: HloInstruction):
    n = (len(instr.operands) - 1) // 2
    return instr.operands[:n], instr.operands[n], instr.operands[n + 1:]


@rewrite("scatter")
def scatter_of_empty_updates(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleScatter: a scatter whose updates are all empty returns its operands."""
    operands, _indices, updates = _scatter_parts(instr)
    if not all(is_zero_element(u.shape) for u in updates):
        return False
    if len(operands) == 1:
        return rw.replace_if_compatible(instr, operands[0])
    return rw.replace_if_compatible(instr, rw.add("tuple", list(operands), instr.shape))


@rewrite("scatter")
def scatter_with_empty_indices(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleScatter: a one-operand scatter with no index values whose update covers the whole
    operand => map(operand, update) with the scatter's combiner."""
    operands, indices, updates = _scatter_parts(instr)
    if len(operands) != 1 or not is_zero_element(indices.shape) \
            or not rw.same_shape(instr.shape, operands[0].shape) \
            or not rw.same_shape(instr.shape, updates[0].shape):
        return False
    return rw.replace_with_new(instr, "map", [operands[0], updates[0]], {
        "dimensions": tuple(range(instr.shape.rank)), "to_apply": instr.attrs["to_apply"]})


# -- map -------------------------------------------------------------------------------------------
@rewrite("map")
def map_of_parameter(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMap: a map whose computation returns a parameter is that operand."""
    root = instr.attrs["to_apply"].root
    return root.opcode == "parameter" and \
        rw.replace_if_compatible(instr, instr.operands[root.parameter_number])


@rewrite("map")
def map_of_constant(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMap: a map whose computation returns a scalar constant is that constant, broadcast."""
    root = instr.attrs["to_apply"].root
    if root.opcode != "constant" or root.shape.rank != 0 or root.literal_unknown:
        return False
    const = rw.add("constant", [], root.shape, literal=root.literal)
    return rw.replace(instr, const if instr.shape.rank == 0 else rw.broadcast(const, instr.shape, ()))


@rewrite("map")
def map_of_elementwise(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleMap: a map whose computation is one elementwise op of its parameters is that op."""
    root = instr.attrs["to_apply"].root
    if not is_elementwise(root.opcode) or not root.operands \
            or any(o.opcode != "parameter" for o in root.operands):
        return False
    operands = [instr.operands[o.parameter_number] for o in root.operands]
    return rw.replace(instr, rw.clone(root, operands, instr.shape))


# -- tuples ----------------------------------------------------------------------------------------
@rewrite("get-tuple-element")
def gte_of_tuple(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleGetTupleElement: get-tuple-element(tuple(a0, ..., an), i) => ai."""
    tup = instr.operands[0]
    return tup.opcode == "tuple" and rw.replace_if_compatible(instr, tup.operands[instr.attrs["index"]])


def _barrier_used_elements(barrier: HloInstruction) -> list[bool] | None:
    used = [s.is_token for s in barrier.shape.tuple_shapes]
    for user in barrier.users:
        if user.opcode != "get-tuple-element":
            return None
        used[user.attrs["index"]] = True
    operand = barrier.operands[0]
    if operand.opcode == "tuple":
        for i, element in enumerate(operand.operands):
            if not used[i] and (len(element.users) > 1 or element.is_root or has_side_effect(element)):
                used[i] = True
    return used


@rewrite("opt-barrier")
def opt_barrier_drops_unused_elements(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleOptimizationBarrier: tuple elements nobody reads after the barrier (and that nothing
    else needs) are no longer passed through it, so they can die."""
    if not instr.shape.is_tuple or instr.is_root:
        return False
    used = _barrier_used_elements(instr)
    if used is None or all(used):
        return False
    operand = instr.operands[0]
    kept = [i for i, u in enumerate(used) if u]
    parts = [operand.operands[i] if operand.opcode == "tuple" else
             rw.add("get-tuple-element", [operand], operand.shape.tuple_shapes[i], {"index": i})
             for i in kept]
    new_operand = rw.add("tuple", parts, Shape.tuple_of([operand.shape.tuple_shapes[i] for i in kept]))
    rw.set_operand(instr, 0, new_operand)
    instr.shape = new_operand.shape
    for user in instr.users:
        user.attrs["index"] = kept.index(user.attrs["index"])
    return True


# -- conditional -----------------------------------------------------------------------------------
@rewrite("conditional")
def conditional_on_converted_pred(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConditional (as XLA's algsimp does it in its pass dumps): conditional(s32
    convert(p), a, b) with branches {f, t} => conditional(p, b, a), true_computation=t,
    false_computation=f, since convert(true) = 1 picks branch 1; simplify-conditional can then
    turn it into a select."""
    index = instr.operands[0]
    comps = instr.attrs.get("branch_computations")
    if comps is None or len(comps) != 2 or index.opcode != "convert" or index.shape.rank != 0:
        return False
    pred = index.operands[0]
    if not pred.shape.element_type.is_pred or pred.shape.rank != 0:
        return False
    attrs = {k: v for k, v in instr.attrs.items() if k != "branch_computations"}
    attrs["true_computation"], attrs["false_computation"] = comps[1], comps[0]
    new = rw.add("conditional", [pred, instr.operands[2], instr.operands[1]], instr.shape, attrs)
    new.metadata, new.frontend_attributes = list(instr.metadata), list(instr.frontend_attributes)
    return rw.replace(instr, new)
