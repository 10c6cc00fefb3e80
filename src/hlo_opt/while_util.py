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

import numpy as np

from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import make_gte, make_tuple
from hlo_common.hlo.hlo_utils import NameUniquer, clone_computation, replace_instruction

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
    new_while = _add_while_like(while_op, new_shape, new_init, cond, body)
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


def _induction_step(body: HloComputation, index: int, type_name: str) -> HloInstruction | None:
    """The constant c when the body's root element `index` is add(gte(param, index), c) of type
    `type_name`."""
    out = body.root.operands[index]
    if out.opcode != "add" or out.shape.rank != 0 or out.shape.element_type.name != type_name:
        return None
    a, b = out.operands
    gte, const = (a, b) if b.opcode == "constant" else (b, a)
    if const.opcode != "constant" or const.literal_unknown or const.shape.rank != 0:
        return None
    if gte.opcode != "get-tuple-element" or gte.operands[0] is not body.parameters[0]:
        return None
    if gte.attrs["index"] != index:
        return None
    return const


def _old_form(comp: HloComputation, state: HloInstruction, old_shape: Shape,
              ivs: dict[int, HloInstruction], counter: int) -> HloInstruction:
    """tuple(...) of the old state: each induction variable i is gte(i) + gte(counter) * c_i."""
    elements = []
    for i in range(len(old_shape.tuple_shapes)):
        element = make_gte(state, i)
        if i in ivs:
            const = comp.add_new_instruction("constant", [], ivs[i].shape, literal=ivs[i].literal)
            step = comp.add_new_instruction("multiply", [make_gte(state, counter), const])
            element = comp.add_new_instruction("add", [element, step])
        elements.append(element)
    return make_tuple(comp, elements)


def _read_through_old_form(comp: HloComputation, new_shape: Shape, old_shape: Shape,
                           ivs: dict[int, HloInstruction], counter: int) -> None:
    param = comp.parameters[0]
    readers = list(param.users)
    param.shape = new_shape
    old = _old_form(comp, param, old_shape, ivs, counter)
    for user in readers:
        user.replace_operand_with(param, old)
    if comp.root is param:
        comp.root = old


def merge_induction_variables(while_op: HloInstruction, type_name: str,
                              uniquer: NameUniquer) -> HloInstruction | None:
    """XLA's TryMergeInductionVariables for one integer type: every `x += c` element becomes
    init + trip_counter * c, with one trip counter (the existing `i += 1` from 0, or a new last
    element). Returns the new loop, or None when fewer than two counters of the type exist."""
    init, body = while_op.operands[0], while_op.attrs["body"]
    if init.opcode != "tuple" or body.root.opcode != "tuple":
        return None
    counter, ivs = None, {}
    for i in range(len(body.root.operands)):
        const = _induction_step(body, i, type_name)
        if const is None:
            continue
        start = init.operands[i]
        if counter is None and int(const.literal) == 1 and start.opcode == "constant" \
                and not start.literal_unknown and not np.asarray(start.literal).any():
            counter = i
        else:
            ivs[i] = const
    if len(ivs) + (counter is not None) < 2:
        return None
    comp, module = while_op.parent, while_op.parent.parent
    old_shape = init.shape
    added = counter is None
    scalar = Shape.array(type_name, ())
    new_shape = Shape.tuple_of(list(old_shape.tuple_shapes) + [scalar]) if added else old_shape
    counter = len(old_shape.tuple_shapes) if added else counter
    cond = clone_computation(while_op.attrs["condition"], module, uniquer)
    new_body = clone_computation(body, module, uniquer)
    _read_through_old_form(cond, new_shape, old_shape, ivs, counter)
    old_root = new_body.root
    param = new_body.parameters[0]
    _read_through_old_form(new_body, new_shape, old_shape, ivs, counter)
    elements = [make_gte(param, i) if i in ivs else make_gte(old_root, i)
                for i in range(len(old_shape.tuple_shapes))]
    dtype = scalar.element_type.np_dtype
    if added:
        one = new_body.add_new_instruction("constant", [], scalar, literal=np.ones((), dtype))
        elements.append(new_body.add_new_instruction("add", [make_gte(param, counter), one]))
    new_body.root = make_tuple(new_body, elements)
    new_init = init
    if added:
        zero = comp.add_new_instruction("constant", [], scalar, literal=np.zeros((), dtype))
        new_init = make_tuple(comp, list(init.operands) + [zero])
    new_while = _add_while_like(while_op, new_shape, new_init, cond, new_body)
    replace_instruction(while_op, _old_form(comp, new_while, old_shape, ivs, counter),
                        preserve_sharding=False)
    return new_while


def _add_while_like(while_op: HloInstruction, shape: Shape, init: HloInstruction, cond: HloComputation,
                    body: HloComputation) -> HloInstruction:
    """A new while of `shape` over `init`, running `cond` and `body`, beside `while_op` in its
    computation, named after it and keeping its metadata, frontend attributes and backend config."""
    comp = while_op.parent
    new_while = HloInstruction(comp.unique_name(while_op.name), "while", shape, [init],
                               {"condition": cond, "body": body})
    new_while.metadata = list(while_op.metadata)
    new_while.frontend_attributes = list(while_op.frontend_attributes)
    new_while.backend_config_data = while_op.backend_config_data
    comp.add_instruction(new_while)
    return new_while
