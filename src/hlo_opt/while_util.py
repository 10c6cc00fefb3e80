"""Rebuilding a while loop with fewer tuple elements (the shared core of XLA's
`RemoveDeadTupleIndices` and `TryRemoveConstantParams`), for `simplify-while-loops`.

    new_while = remove_tuple_indices(while_op, keep=[0, 2], inner={1: None}, uniquer=u)

The condition and body are cloned with the smaller parameter; each removed index is handled
inside the loop as `inner` says (None: it is dead and whatever reads it goes; a constant: its
reads become a copy of that constant; an int: its reads become reads of that kept index), and
outside the loop by the init value (or, per `outer_alias`, by a kept index's result). The old loop
is replaced by a tuple of the same shape, which tuple-simplifier later folds away.
"""

from __future__ import annotations

from hlo_common.ir import HloComputation, HloInstruction
from hlo_common.shape import Shape
from hlo_opt.hlo_creation_utils import make_gte, make_tuple
from hlo_opt.hlo_utils import NameUniquer, clone_computation, replace_instruction

InnerValue = HloInstruction | int | None


def _remove_dependents(comp: HloComputation, doomed: list[HloInstruction]) -> None:
    """Remove `doomed` and every instruction that (transitively) reads one of them."""
    dead = {id(d) for d in doomed}
    order = comp.post_order()
    for instr in order:
        if any(id(op) in dead for op in instr.operands):
            dead.add(id(instr))
    comp.remove_instructions([i for i in reversed(order) if id(i) in dead])


def _rewrite_parameter_reads(comp: HloComputation, new_shape: Shape, new_index: dict[int, int],
                             inner: dict[int, InnerValue]) -> list[HloInstruction]:
    """Point the get-tuple-elements of the parameter at the new indices; returns the dead ones."""
    param = comp.parameters[0]
    param.shape = new_shape
    doomed = []
    for gte in list(param.users):
        if gte.opcode != "get-tuple-element":
            continue
        old = gte.attrs["index"]
        value = inner.get(old) if old not in new_index else old
        if isinstance(value, int):
            gte.attrs["index"] = new_index[value]
        elif value is None:
            doomed.append(gte)
        else:
            const = comp.add_new_instruction("constant", [], value.shape, literal=value.literal,
                                             name=value.name)
            gte.replace_all_uses_with(const)
            comp.remove_instruction(gte)
    return doomed


def remove_tuple_indices(while_op: HloInstruction, keep: list[int], inner: dict[int, InnerValue],
                         uniquer: NameUniquer, outer_alias: dict[int, int] | None = None) -> HloInstruction:
    """Replace `while_op` by a loop over the elements `keep` (sorted old indices); returns it."""
    comp = while_op.parent
    module = comp.parent
    init = while_op.operands[0]
    old_shape = init.shape
    new_shape = Shape.tuple_of([old_shape.tuple_shapes[i] for i in keep])
    new_index = {old: new for new, old in enumerate(keep)}
    cond = clone_computation(while_op.attrs["condition"], module, uniquer)
    body = clone_computation(while_op.attrs["body"], module, uniquer)
    cond_doomed = _rewrite_parameter_reads(cond, new_shape, new_index, inner)
    body_doomed = _rewrite_parameter_reads(body, new_shape, new_index, inner)
    old_root = body.root
    body.root = make_tuple(body, [old_root.operands[i] for i in keep])
    _remove_dependents(cond, cond_doomed)
    _remove_dependents(body, body_doomed)
    if old_root.parent is body and not old_root.users:
        body.remove_instruction(old_root)

    if init.opcode == "tuple":
        new_init = make_tuple(comp, [init.operands[i] for i in keep])
    else:
        new_init = make_tuple(comp, [make_gte(init, i) for i in keep])
    new_while = HloInstruction(comp.unique_name(while_op.name), "while", new_shape, [new_init],
                               {"condition": cond, "body": body})
    new_while.metadata = list(while_op.metadata)
    new_while.frontend_attributes = list(while_op.frontend_attributes)
    new_while.backend_config_data = while_op.backend_config_data
    comp.add_instruction(new_while)
    elements = []
    for i in range(len(old_shape.tuple_shapes)):
        source = i if i in new_index else (outer_alias or {}).get(i)
        if source is not None:
            elements.append(make_gte(new_while, new_index[source]))
        elif init.opcode == "tuple":
            elements.append(init.operands[i])
        else:
            elements.append(make_gte(init, i))
    replace_instruction(while_op, make_tuple(comp, elements), preserve_sharding=False)
    return new_while
