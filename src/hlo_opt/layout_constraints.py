"""The generic part of layout assignment (XLA's `xla/service/layout_assignment.cc`): layout
constraints on values and on operand uses, their propagation down and up the graph, defaults for
what stays unconstrained, and copies where a use wants another layout than its operand has.

Where it sits: `passes/layout_assignment.py` (GpuLayoutAssignment, "layout-assignment") subclasses
`LayoutAssignment` and adds the GPU backend constraints (cuBLAS operand layouts, sort, fft, ...).

The model, per computation (callees before callers):

- every array leaf an instruction *defines* has one layout (a *buffer constraint*); `tuple`,
  `get-tuple-element`, `opt-barrier`, `domain` and `add-dependency` forward their operands' values
  and define nothing;
- a use (instruction, operand number) may require a layout (an *operand constraint*); a use whose
  operand has another layout gets a `copy` when layouts are finally assigned;
- constraints are *mandatory* (parameters of the entry, pinned instructions, library calls) or
  not; a non-mandatory constraint never replaces an existing one, a mandatory one replaces a
  non-mandatory one, and every slot changes at most twice, so propagation always ends;
- propagation is depth first, as XLA's: a value's layout flows to its uses, and through ops that
  keep layouts (elementwise, slice, concatenate, ...) to their operands; transposes and reshapes
  pass it on so that they become bitcasts when possible;
- pinned instructions keep the layouts they have (bitcast, fusion, library custom calls,
  custom calls with `operand_layout_constraints`, async and host-transfer ops) and control flow
  takes its callee's computation layout; fusion and other embedded computations are not touched.
"""

from __future__ import annotations

from collections import deque
from typing import Iterator

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_opt.layout_util import (
    array_leaves, copy_to_layout, default_m2m, filter_layout_to_dims, inverse_permutation,
    replace_leaf_layouts, reshape_bitcast_layout, same_m2m, subshape_or_none, true_rank, with_minor_to_major,
)

# XLA's LayoutAssignment::InstructionCanChangeLayout() == false: operands of the same rank as the
# result must have the result's layout.
CANNOT_CHANGE_LAYOUT = frozenset({
    "abs", "add", "and", "atan2", "bitcast-convert", "ceil", "clamp", "count-leading-zeros", "compare",
    "complex", "concatenate", "convert", "cosine", "all-gather", "all-gather-start", "all-gather-done",
    "all-to-all", "collective-permute", "divide", "dynamic-slice", "dynamic-update-slice", "exponential",
    "exponential-minus-one", "fft", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "map",
    "maximum", "minimum", "multiply", "negate", "not", "or", "xor", "pad", "power", "real",
    "reduce-precision", "reduce-window", "remainder", "reverse", "round-nearest-afz",
    "round-nearest-even", "rsqrt", "scatter", "select", "select-and-scatter", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "slice", "sort", "sqrt", "cbrt",
    "subtract", "stochastic-convert", "tanh", "tan", "popcnt", "triangular-solve", "cholesky",
    "set-dimension-size", "all-reduce", "reduce-scatter", "all-reduce-start", "all-reduce-done",
    "erf", "mulhi", "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh",
})
# Ops whose result is (part of) an operand's value: they define no buffer of their own.
FORWARDING = {"tuple": None, "get-tuple-element": None, "opt-barrier": 0, "domain": 0, "add-dependency": 0}
# Ops whose existing layouts are kept (operands and result), as XLA's layout-constrained ones.
PINNED_OPCODES = frozenset({
    "bitcast", "fusion", "infeed", "outfeed", "async-start", "async-update", "async-done", "copy-start",
    "copy-done", "send", "send-done", "recv", "recv-done", "call", "while", "conditional",
})
LIBRARY_CALL_PREFIXES = ("__cublas", "__cudnn")
_MAX_CHANGES = 2  # a slot's layout is replaced at most this many times


class _Slot:
    __slots__ = ("value", "mandatory", "changes")

    def __init__(self, value, mandatory: bool):
        self.value, self.mandatory, self.changes = value, mandatory, 0


def _constrain(slots: dict, key, value, mandatory: bool, same) -> bool:
    """Record `value` in the slot `key`: a first constraint sets it; the same layout again can only
    make it mandatory; a different one replaces it only when mandatory, at most _MAX_CHANGES
    times. Whether the slot changed (and its users must be visited again)."""
    cur = slots.get(key)
    if cur is None:
        slots[key] = _Slot(value, mandatory)
        return True
    if same(cur.value):
        cur.mandatory |= mandatory
        return False
    if not mandatory or cur.changes >= _MAX_CHANGES:
        return False
    cur.value, cur.mandatory, cur.changes = value, True, cur.changes + 1
    return True


class LayoutAssignment:
    """Assigns a layout to every array value of the non-embedded computations of a module."""

    def __init__(self, module: HloModule):
        self.module = module
        self.orig: dict[int, Shape] = {id(i): i.shape for c in module.computations for i in c.instructions}
        self.changed = False
        self._pinned_cache: dict[int, tuple[list[Shape], Shape]] = {}

    # -- hooks for backends ---------------------------------------------------------------------------
    def add_backend_constraints(self, comp: HloComputation) -> None:
        """Backend-specific constraints (XLA's AddBackendConstraints); the base adds none."""

    def instruction_can_change_layout(self, instr: HloInstruction) -> bool:
        return instr.opcode not in CANNOT_CHANGE_LAYOUT

    def propagate_reduction_layout_to_operand(self, reduce: HloInstruction) -> bool:
        return False

    def is_pinned(self, instr: HloInstruction) -> bool:
        if instr.opcode in PINNED_OPCODES:
            return True
        if instr.opcode == "custom-call":
            target = str(instr.attrs.get("custom_call_target", ""))
            return "operand_layout_constraints" in instr.attrs or target.startswith(LIBRARY_CALL_PREFIXES)
        return bool(instr.attrs.get("constrain_layout"))

    # -- driver ---------------------------------------------------------------------------------------
    def run(self) -> bool:
        entry = self.module.entry
        for comp, role in self._computation_order():
            params, result = self._computation_layout(comp, role)
            self._run_on_computation(comp, params, result, role)
        if self.module.entry_computation_layout is not None:
            self.module.entry_computation_layout = ([p.shape for p in entry.parameters], entry.root.shape)
        return self.changed

    def _computation_order(self) -> list[tuple[HloComputation, tuple]]:
        """Computations reached from the entry through call/while/conditional, callees first
        (a while body before its condition); each with its role."""
        order: list[tuple[HloComputation, tuple]] = []
        seen: set[int] = set()

        def visit(comp: HloComputation, role: tuple) -> None:
            if id(comp) in seen:
                return
            seen.add(id(comp))
            for instr in comp.post_order():
                if instr.opcode == "while":
                    body, cond = instr.attrs["body"], instr.attrs["condition"]
                    visit(body, ("while_body",))
                    visit(cond, ("while_condition", body))
                elif instr.opcode == "call":
                    visit(instr.attrs["to_apply"], ("call",))
                elif instr.opcode == "conditional":
                    for branch in instr.called_computations():
                        visit(branch, ("branch",))
            order.append((comp, role))

        visit(self.module.entry, ("entry",))
        return order

    def _computation_layout(self, comp: HloComputation,
                            role: tuple) -> tuple[list[Shape] | None, Shape | None]:
        if role[0] == "entry":
            layout = self.module.entry_computation_layout
            if layout is not None and len(layout[0]) == len(comp.parameters):
                return list(layout[0]), layout[1]
            return [self.orig[id(p)] for p in comp.parameters], self.orig[id(comp.root)]
        if role[0] == "while_condition":
            return [p.shape for p in role[1].parameters], None
        return None, None

    # -- one computation ----------------------------------------------------------------------------
    def _run_on_computation(self, comp: HloComputation, params: list[Shape] | None, result: Shape | None,
                            role: tuple) -> None:
        self.comp = comp
        self.buf: dict[tuple[int, tuple], _Slot] = {}
        self.opc: dict[tuple[int, int], _Slot] = {}
        self.work: deque = deque()
        self.is_while_body = role[0] == "while_body"
        order = comp.post_order()
        if params is not None:
            for p in comp.parameters:
                for idx, leaf in array_leaves(params[p.parameter_number]):
                    self.set_buffer(p, idx, leaf.minor_to_major, True)
        for instr in order:
            if self.is_pinned(instr):
                operands, out = self.pinned_shapes(instr)
                for idx, leaf in array_leaves(out):
                    self.set_buffer(instr, idx, leaf.minor_to_major, True)
                for k, shape in enumerate(operands):
                    self.set_operand(instr, k, shape, True)
        if result is not None:
            self._constrain_defs(comp.root, result, True)
        self.add_backend_constraints(comp)
        self.propagate()
        for instr in order:
            for idx, leaf in self.defined_leaves(instr):
                if (id(instr), idx) not in self.buf:
                    m2m = self.orig[id(instr)].subshape(idx).minor_to_major if instr.opcode == "constant" \
                        else default_m2m(leaf.rank)
                    self.set_buffer(instr, idx, m2m, False)
                    self.propagate()
        if self.is_while_body:
            result = self._final_shape(comp.parameters[0], {}) if comp.parameters else None
        self._assign(order, result)

    # -- constraints ----------------------------------------------------------------------------------
    def set_buffer(self, instr: HloInstruction, idx: tuple, m2m, mandatory: bool) -> None:
        m2m = tuple(m2m)
        if _constrain(self.buf, (id(instr), idx), m2m, mandatory, lambda cur: cur == m2m):
            self.work.appendleft(("buf", instr, idx))

    def set_operand(self, user: HloInstruction, k: int, shape: Shape, mandatory: bool) -> None:
        if _constrain(self.opc, (id(user), k), shape, mandatory, lambda cur: same_m2m(cur, shape)):
            self.work.appendleft(("op", user, k))

    def set_operand_layout(self, user: HloInstruction, k: int, m2m, mandatory: bool = True) -> None:
        self.set_operand(user, k, with_minor_to_major(user.operands[k].shape, m2m), mandatory)

    def set_instruction_layout(self, instr: HloInstruction, shape: Shape, mandatory: bool = True) -> None:
        for idx, leaf in array_leaves(shape):
            self.set_buffer(instr, idx, leaf.minor_to_major, mandatory)

    def operand_constraint(self, user: HloInstruction, k: int) -> Shape | None:
        slot = self.opc.get((id(user), k))
        return slot.value if slot is not None else None

    def defined_leaves(self, instr: HloInstruction) -> list[tuple[tuple, Shape]]:
        if instr.opcode in FORWARDING:
            return []
        return array_leaves(instr.shape)

    def defs_of(self, instr: HloInstruction, idx: tuple) -> Iterator[tuple[HloInstruction, tuple]]:
        """The instructions (and leaf indices) that define the value at `idx` of `instr`."""
        for _ in range(64):
            if instr.opcode == "tuple":
                if not idx:
                    return
                instr, idx = instr.operands[idx[0]], idx[1:]
            elif instr.opcode == "get-tuple-element":
                instr, idx = instr.operands[0], (instr.attrs["index"],) + idx
            elif instr.opcode in FORWARDING:
                instr = instr.operands[FORWARDING[instr.opcode]]
            else:
                yield instr, idx
                return

    def array_uses(self, instr: HloInstruction, idx: tuple) -> list[tuple[HloInstruction, int]]:
        """Uses (user, operand number) that read the value at `idx` of `instr` as a whole array."""
        out: list[tuple[HloInstruction, int]] = []
        stack = [(instr, idx)]
        seen: set[tuple[int, tuple]] = set()
        while stack:
            node, index = stack.pop()
            if (id(node), index) in seen or len(seen) > 256:
                continue
            seen.add((id(node), index))
            for user in node.users:
                for k, op in enumerate(user.operands):
                    if op is not node:
                        continue
                    if user.opcode == "get-tuple-element":
                        if index and index[0] == user.attrs["index"]:
                            stack.append((user, index[1:]))
                    elif user.opcode == "tuple":
                        stack.append((user, (k,) + index))
                    elif user.opcode in FORWARDING:
                        if k == FORWARDING[user.opcode]:
                            stack.append((user, index))
                    elif not index:
                        out.append((user, k))
        return out

    def _constrain_defs(self, instr: HloInstruction, shape: Shape, mandatory: bool) -> None:
        """A use wants `shape`: give it to the values it reads that have no layout yet."""
        for idx, leaf in array_leaves(shape):
            for d, didx in self.defs_of(instr, idx):
                if (id(d), didx) in self.buf or (d.opcode == "reduce" and d.shape.is_tuple):
                    continue
                target = subshape_or_none(d.shape, didx)
                if target is not None and target.is_array and target.rank == leaf.rank:
                    self.set_buffer(d, didx, leaf.minor_to_major, mandatory)

    # -- propagation ----------------------------------------------------------------------------------
    def propagate(self) -> None:
        while self.work:
            kind, instr, arg = self.work.popleft()
            if kind == "buf":
                self._propagate_buffer(instr, arg)
            else:
                self._propagate_operand(instr, arg)

    def _propagate_buffer(self, instr: HloInstruction, idx: tuple) -> None:
        m2m = self.buf[(id(instr), idx)].value
        if not idx and instr.shape.is_array and instr.shape.rank >= 2 and not self.is_pinned(instr):
            self._buffer_to_operands(instr, m2m)
        for user, k in self.array_uses(instr, idx):
            if (id(user), k) not in self.opc and not self.is_pinned(user):
                self.set_operand_layout(user, k, m2m, False)
        if self.is_while_body and not idx and self.comp.root.opcode == "tuple" and self.comp.parameters:
            param = self.comp.parameters[0]
            for t, op in enumerate(self.comp.root.operands):
                if op is instr and param.shape.is_tuple and (id(param), (t,)) not in self.buf:
                    self.set_buffer(param, (t,), m2m, False)

    def _buffer_to_operands(self, instr: HloInstruction, m2m: tuple) -> None:
        rank = instr.shape.rank
        for k, op in enumerate(instr.operands):
            if not op.shape.is_array or op.shape.rank <= 1:
                continue
            if not self.instruction_can_change_layout(instr):
                if op.shape.rank == rank:
                    self.set_operand_layout(instr, k, m2m, True)
            elif instr.opcode == "broadcast":
                dims = tuple(instr.attrs.get("dimensions", ()))
                operand_m2m = filter_layout_to_dims(instr.shape.with_layout(m2m), dims)
                self.set_operand_layout(instr, k, operand_m2m, True)
            else:
                cur = self.opc.get((id(instr), k))
                if cur is None or not cur.mandatory:
                    chosen = self.choose_operand_layout(instr, k, m2m)
                    if chosen is not None:
                        self.set_operand_layout(instr, k, chosen, False)

    def _propagate_operand(self, user: HloInstruction, k: int) -> None:
        shape = self.opc[(id(user), k)].value
        operand = user.operands[k]
        self._constrain_defs(operand, shape, False)
        if not operand.shape.is_array or operand.shape.rank <= 1:
            return
        if user.opcode in FORWARDING or self.is_pinned(user):
            return
        m2m = shape.minor_to_major
        if not self.instruction_can_change_layout(user):
            if user.shape.is_array:
                self._to_siblings(user, k, m2m)
                if user.shape.rank == operand.shape.rank:
                    self.set_buffer(user, (), m2m, False)
            return
        if user.opcode == "reduce" and user.shape.is_tuple:
            dims = tuple(user.attrs.get("dimensions", ()))
            out = filter_layout_to_dims(operand.shape.with_layout(m2m),
                                        [d for d in range(operand.shape.rank) if d not in dims])
            for idx, _ in array_leaves(user.shape):
                self.set_buffer(user, idx, out, True)
            return
        cur = self.buf.get((id(user), ()))
        if user.shape.is_array and (cur is None or not cur.mandatory):
            chosen = self.choose_output_layout(user, k, m2m)
            if chosen is not None:
                self.set_buffer(user, (), chosen, False)

    def _to_siblings(self, user: HloInstruction, k: int, m2m: tuple) -> None:
        operand = user.operands[k]
        if user.opcode == "concatenate":
            dim = user.attrs["dimensions"][0]
            if any(s.shape.dims[dim] > operand.shape.dims[dim] for s in user.operands):
                return
        for j, sib in enumerate(user.operands):
            if sib is operand or not sib.shape.is_array or sib.shape.rank != operand.shape.rank:
                continue
            if (id(user), j) not in self.opc:
                self.set_operand_layout(user, j, m2m, False)

    def choose_operand_layout(self, instr: HloInstruction, k: int, out_m2m: tuple) -> tuple | None:
        """The operand layout that makes `instr` cheapest given its result layout (XLA's
        ChooseOperandLayoutFromOutputLayout): a bitcast for reshape/transpose, a row reduction."""
        operand = instr.operands[k]
        if instr.opcode == "reshape":
            if true_rank(operand.shape) == 1 and true_rank(instr.shape) == 1:
                return None
            return reshape_bitcast_layout(instr.shape.with_layout(out_m2m), operand.shape)
        if instr.opcode == "transpose":
            perm = instr.attrs["dimensions"]
            return tuple(perm[d] for d in out_m2m)
        if instr.opcode == "reduce" and k == 0 and self.propagate_reduction_layout_to_operand(instr):
            dims = list(instr.attrs.get("dimensions", ()))
            kept = [d for d in range(operand.shape.rank) if d not in dims]
            return tuple(reversed(dims)) + tuple(kept[d] for d in out_m2m)
        return None

    def choose_output_layout(self, user: HloInstruction, k: int, op_m2m: tuple) -> tuple | None:
        """XLA's ChooseOutputLayoutFromOperandLayout: reshapes and transposes become bitcasts."""
        operand = user.operands[k]
        if user.opcode == "reshape":
            if true_rank(operand.shape) == 1 and true_rank(user.shape) == 1:
                return None
            return reshape_bitcast_layout(operand.shape.with_layout(op_m2m), user.shape)
        if user.opcode == "transpose":
            inv = inverse_permutation(user.attrs["dimensions"])
            return tuple(inv[d] for d in op_m2m)
        return None

    # -- pinned instructions --------------------------------------------------------------------------
    def pinned_shapes(self, instr: HloInstruction) -> tuple[list[Shape], Shape]:
        """(operand shapes, result shape) a pinned instruction keeps or takes from its callee."""
        key = id(instr)
        if key not in self._pinned_cache:
            self._pinned_cache[key] = self._compute_pinned(instr)
        return self._pinned_cache[key]

    def _compute_pinned(self, instr: HloInstruction) -> tuple[list[Shape], Shape]:
        orig_ops = [self.orig.get(id(o), o.shape) for o in instr.operands]
        out = self.orig.get(id(instr), instr.shape)
        op = instr.opcode
        if op == "fusion":
            fused = instr.attrs["calls"]
            return [fused.parameter(k).shape for k in range(len(instr.operands))], fused.root.shape
        if op == "call":
            callee = instr.attrs["to_apply"]
            return [p.shape for p in callee.parameters], callee.root.shape
        if op == "while":
            param = instr.attrs["body"].parameters[0].shape
            return [param], param
        if op == "conditional":
            return self._conditional_layout(instr, orig_ops[0])
        if op == "custom-call" and "operand_layout_constraints" in instr.attrs:
            return list(instr.attrs["operand_layout_constraints"]), out
        # Async starts keep the operands in their result (XLA's points-to analysis): element {1}
        # of copy-start, element {0} (a tuple of the operands) of async-start. Their layouts are
        # the ones the operands must have, whatever layouts the producers were given.
        if op == "copy-start" and out.is_tuple and len(out.tuple_shapes) > 1:
            return [out.tuple_shapes[1]], out
        if op == "async-start" and out.is_tuple and out.tuple_shapes[0].is_tuple \
                and len(out.tuple_shapes[0].tuple_shapes) == len(orig_ops):
            return list(out.tuple_shapes[0].tuple_shapes), out
        return orig_ops, out

    def _conditional_layout(self, instr: HloInstruction, pred: Shape) -> tuple[list[Shape], Shape]:
        """XLA: the branch with the most instructions gives the result layout; the other branches
        copy their roots to it."""
        branches = instr.called_computations()
        best = max(range(len(branches)), key=lambda j: (len(branches[j].instructions), -j))
        result = branches[best].root.shape
        for branch in branches:
            if not same_m2m(branch.root.shape, result):
                branch.root = copy_to_layout(branch.root, result)
                self.changed = True
        return [pred] + [b.parameters[0].shape for b in branches], result

    # -- assignment -----------------------------------------------------------------------------------
    def _final_shape(self, instr: HloInstruction, new_shapes: dict[int, Shape]) -> Shape:
        if instr.opcode in FORWARDING:
            ops = [new_shapes.get(id(o), o.shape) for o in instr.operands]
            if instr.opcode == "tuple":
                return Shape.tuple_of(ops)
            if instr.opcode == "get-tuple-element":
                return ops[0].tuple_shapes[instr.attrs["index"]]
            return ops[FORWARDING[instr.opcode]]
        layouts = {idx: slot.value for idx, _ in array_leaves(instr.shape)
                   if (slot := self.buf.get((id(instr), idx))) is not None}
        return replace_leaf_layouts(instr.shape, layouts)

    def required_operand_shapes(self, instr: HloInstruction) -> dict[int, Shape]:
        """The layout every operand must have when layouts are final (missing: any layout)."""
        if instr.opcode in FORWARDING:
            return {}
        if self.is_pinned(instr):
            return dict(enumerate(self.pinned_shapes(instr)[0]))
        req = {k: slot.value for k in range(len(instr.operands))
               if (slot := self.opc.get((id(instr), k))) is not None}
        shape = instr.shape
        if not self.instruction_can_change_layout(instr) and shape.is_array:
            for k, op in enumerate(instr.operands):
                if op.shape.is_array and op.shape.rank == shape.rank and shape.rank >= 2:
                    req[k] = with_minor_to_major(op.shape, shape.minor_to_major)
        elif instr.opcode == "broadcast":
            dims = tuple(instr.attrs.get("dimensions", ()))
            req[0] = with_minor_to_major(instr.operands[0].shape, filter_layout_to_dims(shape, dims))
        return req

    def _assign(self, order: list[HloInstruction], result: Shape | None) -> None:
        for instr in order:
            if not self.instruction_can_change_layout(instr) and instr.shape.is_tuple \
                    and not self.is_pinned(instr):
                for i, op in enumerate(instr.operands[:len(instr.shape.tuple_shapes)]):
                    if op.shape.is_array and instr.shape.tuple_shapes[i].compatible(op.shape):
                        self.buf[(id(instr), (i,))] = _Slot(op.shape.minor_to_major, True)
            new = self._final_shape(instr, {})
            if new != instr.shape:
                instr.shape = new
                self.changed = True
            for k, want in sorted(self.required_operand_shapes(instr).items()):
                operand = instr.operands[k]
                if not same_m2m(operand.shape, want):
                    instr.replace_operand(k, copy_to_layout(operand, want, before=instr))
                    self.changed = True
        root = self.comp.root
        if result is not None and not same_m2m(root.shape, result):
            self.comp.root = copy_to_layout(root, result)
            self.changed = True
