"""What the prepare passes that turn a custom call into plain HLO share (`gemm-fallback`,
`cudnn-conv-fallback`): a builder for new computations, and `CallLowering`, which places new
instructions before the call (so a schedule stays valid) and hands the call's users its
replacement - get-tuple-elements read the new leaves directly, and only other users (or the
root) get a tuple of them.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape


def once(make):
    """`make()` the first time, the same instruction after."""
    made = []

    def get():
        if not made:
            made.append(make())
        return made[0]
    return get


class ComputationBuilder:
    """Adds instructions to one computation, in order."""

    def __init__(self, comp: HloComputation):
        self.comp = comp

    def add(self, opcode: str, operands: list, shape: Shape, attrs: dict | None = None,
            **fields) -> HloInstruction:
        return self.comp.add_instruction(HloInstruction.create(opcode, operands, shape, attrs,
                                                               self.comp.unique_name(opcode), **fields))

    def constant(self, value, t: PrimitiveType) -> HloInstruction:
        return self.add("constant", [], Shape.array(t, ()), literal=np.asarray(value).astype(t.np_dtype))

    def scalar_like(self, value, like: HloInstruction) -> HloInstruction:
        c = self.constant(value, like.shape.element_type)
        return self.add("broadcast", [c], like.shape, {"dimensions": ()})

    def binary(self, opcode: str, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        return self.add(opcode, [a, b], a.shape)

    def convert(self, x: HloInstruction, t: PrimitiveType) -> HloInstruction:
        if x.shape.element_type is t:
            return x
        return self.add("convert", [x], x.shape.with_element_type(t))


class CallLowering:
    """The replacement of one custom call `call` of computation `comp` by new instructions."""

    def __init__(self, module: HloModule, comp: HloComputation, call: HloInstruction):
        self.module, self.comp, self.call = module, comp, call

    def _add_computation(self, body: HloComputation) -> None:
        """A new called computation of the module, listed before the caller's."""
        self.module.computations.insert(self.module.computations.index(self.comp), body)
        body.parent = self.module

    def _replace_tuple_call(self, leaves: list[Callable[[], HloInstruction]]) -> None:
        """Replace the tuple-shaped call by its leaves (`leaves[i]()` makes element i, on first use)."""
        for user in list(self.call.users):  # get-tuple-elements read the leaves directly
            if user.opcode == "get-tuple-element" and user.parent is self.comp:
                self._replace(user, leaves[int(user.attrs["index"])]())
        if self.call.users or self.call is self.comp.root:
            made = [leaf() for leaf in leaves]
            self._replace(self.call, self._top("tuple", made, Shape.tuple_of([x.shape for x in made])))
        else:
            self.comp.remove_instruction(self.call)

    def _replace(self, old: HloInstruction, new: HloInstruction) -> None:
        new.metadata = list(self.call.metadata)
        name = old.name
        self.comp.replace_instruction(old, new, remove_dead_operands=False)
        if new.opcode in ("tuple", "get-tuple-element"):
            new.name = name  # free again now that `old` is gone

    def _top(self, opcode: str, operands: list, shape: Shape, attrs: dict | None = None,
             name: str | None = None, **fields) -> HloInstruction:
        """A new instruction of the call's computation, placed before the call (schedules stay valid)."""
        name = self.comp.unique_name(name or opcode)
        instr = HloInstruction.create(opcode, operands, shape, attrs, name, **fields)
        return self.comp.add_instruction(instr, before=self.call)

    def _zeros(self, shape: Shape) -> HloInstruction:
        """A fusion that broadcasts a zero (the thunk emitter makes it a memset)."""
        body = HloComputation(self.module.unique_computation_name(f"{self.call.name}_zeros"))
        b = ComputationBuilder(body)
        body.root = b.add("broadcast", [b.constant(0, shape.element_type)], shape, {"dimensions": ()})
        self._add_computation(body)
        return self._top("fusion", [], shape, {"kind": "kLoop", "calls": body}, name="workspace_zeros")
