"""A read-only view of what would be one kernel (XLA's `HloFusionAdaptor`,
`xla/hlo/utils/hlo_traversal.h`).

Where it sits: the fusion analysis (`hlo_fusion_analysis`), the hero search (`ir_emission_utils`)
and hlo-opt's fusion rules walk fusions through it. The view (`FusionAdaptor`) is what lets one
analysis cover three cases without building anything: a fusion instruction (its fused
computation), a lone instruction (a one-op fusion), and a producer + consumer pair as if fused
(the consumer's parameters that the producer feeds resolve to the producer's roots). Nodes are
the real instructions; an operand outside the view is returned as itself (a fused `parameter`,
or an instruction of the outer computation): `contains` is false.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloComputation, HloInstruction


class _Part:
    """One piece of a view: a fusion instruction (its computation), a lone instruction, or a bare
    computation (no caller known)."""

    __slots__ = ("instr", "comp", "leaf_outputs")

    def __init__(self, instr: HloInstruction | None, comp: HloComputation | None):
        self.instr = instr
        self.comp = comp
        if comp is None:
            self.leaf_outputs = [instr]
        else:
            root = comp.root
            self.leaf_outputs = list(root.operands) if root.opcode == "tuple" else [root]


class FusionAdaptor:
    """A read-only view of what would be one kernel (XLA's HloFusionAdaptor); see the module doc."""

    def __init__(self, parts: list[_Part], roots_from: list[int], extra_outputs_from: list[int] = ()):
        self.parts = parts
        self._by_comp = {p.comp: p for p in parts if p.comp is not None}
        self._by_instr = {p.instr: p for p in parts if p.instr is not None}
        self._singles = {p.instr: p for p in parts if p.comp is None}
        self._operands: dict[HloInstruction, list[HloInstruction]] = {}
        self._users: dict[HloInstruction, list[HloInstruction]] = {}
        self._inputs: list[HloInstruction] | None = None
        self._input_values: list[HloInstruction] | None = None
        self._post_order: list[HloInstruction] | None = None
        roots: list[HloInstruction] = []
        for k in roots_from:
            for r in self._outputs(parts[k]):
                roots.append(r)
        for k in extra_outputs_from:
            for r in self._outputs(parts[k]):
                if r not in roots and self._has_outside_users(parts[k], r):
                    roots.append(r)
        self._roots = roots

    # constructors
    @staticmethod
    def for_instruction(instr: HloInstruction) -> FusionAdaptor:
        """A fusion's computation, or a lone instruction as a one-op fusion."""
        part = _Part(instr, instr.fused_computation()) if instr.opcode == "fusion" else _Part(instr, None)
        return FusionAdaptor([part], [0])

    @staticmethod
    def for_computation(comp: HloComputation) -> FusionAdaptor:
        """A computation as a fusion body whose caller is unknown (parameters stay external)."""
        return FusionAdaptor([_Part(None, comp)], [0])

    @staticmethod
    def for_producer_consumer(producer: HloInstruction, consumer: HloInstruction,
                              with_extra_outputs: bool = False) -> FusionAdaptor:
        """`producer` fused into `consumer`; with `with_extra_outputs`, producer outputs used
        outside the consumer are roots too (a multi-output fusion)."""
        parts = []
        for instr in (producer, consumer):
            parts.append(_Part(instr, instr.fused_computation()) if instr.opcode == "fusion"
                         else _Part(instr, None))
        return FusionAdaptor(parts, [1], [0] if with_extra_outputs else [])

    # membership
    def _part_of(self, node: HloInstruction) -> _Part | None:
        p = self._singles.get(node)
        if p is not None:
            return p
        p = self._by_comp.get(node.parent)
        if p is None or node.opcode == "parameter" or (node is p.comp.root and node.opcode == "tuple"):
            return None
        return p

    def contains(self, node: HloInstruction) -> bool:
        return self._part_of(node) is not None

    # graph
    def _outputs(self, part: _Part) -> list[HloInstruction]:
        """The part's outputs, resolved (a parameter root resolves across parts); the tuple
        elements of one multi-output op (gte(reduce, i)) collapse into that op."""
        out: list[HloInstruction] = []
        for leaf in part.leaf_outputs:
            node = leaf
            if node.opcode == "get-tuple-element" and part.comp is not None and node.parent is part.comp:
                node = node.operands[0]
            if not self.contains(node):
                node = self._resolve(node, part)
            if not out or out[-1] is not node:
                out.append(node)
        return out

    def _resolve(self, x: HloInstruction, part: _Part | None) -> HloInstruction:
        """An operand outside every part's nodes, seen from `part`: the producer's output it
        stands for when the producer is in the view, else itself (an external input)."""
        outer = x
        if x.opcode == "parameter" and part is not None and part.comp is not None and x.parent is part.comp:
            if part.instr is None:
                return x
            outer = part.instr.operands[x.parameter_number]
        p = self._by_instr.get(outer)
        index = 0
        if p is None and outer.opcode == "get-tuple-element":
            p = self._by_instr.get(outer.operands[0])
            index = outer.attrs.get("index", 0)
        if p is None or p is part:
            return x
        leaf = p.leaf_outputs[index] if p.comp is not None and p.comp.root.opcode == "tuple" \
            else p.leaf_outputs[0]
        if p.comp is not None and leaf.opcode == "parameter" and leaf.parent is p.comp:
            return self._resolve(leaf, p)
        return leaf

    def operands(self, node: HloInstruction) -> list[HloInstruction]:
        ops = self._operands.get(node)
        if ops is None:
            part = self._part_of(node)
            ops = [o if self.contains(o) else self._resolve(o, part) for o in node.operands]
            self._operands[node] = ops
        return ops

    def _has_outside_users(self, part: _Part, node: HloInstruction) -> bool:
        outer = part.instr
        if outer is None:
            return False
        consumers = set(self._by_instr)
        return any(u not in consumers for u in outer.users)

    def users(self, node: HloInstruction) -> list[HloInstruction]:
        """Users within the view (across the producer -> consumer edge too)."""
        us = self._users.get(node)
        if us is not None:
            return us
        part = self._part_of(node)
        us = [u for u in node.users if self.contains(u)]
        if part is not None and part.instr is not None and (part.comp is None or node in part.leaf_outputs
                                                            or self._gte_root_of(part, node)):
            outer_values = [part.instr]
            if part.comp is not None and part.comp.root.opcode == "tuple":
                idx = {k for k, leaf in enumerate(part.leaf_outputs)
                       if leaf is node or (leaf.opcode == "get-tuple-element" and leaf.operands[0] is node)}
                outer_values = [u for u in part.instr.users
                                if u.opcode == "get-tuple-element" and u.attrs.get("index") in idx]
            for value in outer_values:
                for user in value.users:
                    q = self._by_instr.get(user)
                    if q is None or q is part or q.comp is None:
                        continue
                    for i, o in enumerate(user.operands):
                        if o is value:
                            us.extend(u for u in q.comp.parameter(i).users if self.contains(u))
        seen: set = set()
        us = [u for u in us if not (u in seen or seen.add(u))]
        self._users[node] = us
        return us

    @staticmethod
    def _gte_root_of(part: _Part, node: HloInstruction) -> bool:
        return any(leaf.opcode == "get-tuple-element" and leaf.operands[0] is node
                   for leaf in part.leaf_outputs)

    def roots(self) -> list[HloInstruction]:
        return self._roots

    def post_order(self) -> list[HloInstruction]:
        """Every node, operands before users (producer part first). Cached: a view is a snapshot
        (build a new one after editing the graph)."""
        if self._post_order is not None:
            return self._post_order
        out: list[HloInstruction] = []
        for p in self.parts:
            if p.comp is None:
                out.append(p.instr)
            else:
                out.extend(i for i in p.comp.post_order() if self.contains(i))
        self._post_order = out
        return out

    def external_value(self, x: HloInstruction) -> HloInstruction:
        """The outer-computation instruction an external input stands for (a fused parameter maps
        to the fusion's operand)."""
        if x.opcode == "parameter":
            p = self._by_comp.get(x.parent)
            if p is not None and p.instr is not None:
                return p.instr.operands[x.parameter_number]
        return x

    def inputs(self) -> list[HloInstruction]:
        """The external inputs as seen from the nodes (fused parameters or outer instructions),
        part by part (the producer's first) in parameter order, each outer value once. Read
        from the parameters, not a walk over the nodes: a view of a large fusion stays cheap."""
        if self._inputs is None:
            self._collect_inputs()
        return self._inputs

    def input_values(self) -> list[HloInstruction]:
        """`inputs()` as the outer values they stand for (`external_value` of each)."""
        if self._input_values is None:
            self._collect_inputs()
        return self._input_values

    def _collect_inputs(self) -> None:
        seen: set = set()
        out = []
        values = []
        for part in self.parts:
            for o, key in self._part_inputs(part):
                if key not in seen:
                    seen.add(key)
                    out.append(o)
                    values.append(key)
        self._inputs = out
        self._input_values = values

    def _part_inputs(self, part: _Part):
        """(input as seen from the part, the outer value it stands for) of one part; a fused
        parameter fed by an outer value is answered without the general resolution."""
        others = self._by_instr
        if part.comp is None:
            for o in part.instr.operands:
                r = self._resolve(o, part)
                if not self.contains(r):
                    yield r, self.external_value(r)
            return
        outer_ops = part.instr.operands if part.instr is not None else None
        for p in part.comp.parameters:
            if not p.users:
                continue
            if outer_ops is None:
                yield p, p
                continue
            outer = outer_ops[p.parameter_number]
            if outer in others or (outer.opcode == "get-tuple-element" and outer.operands[0] in others):
                r = self._resolve(p, part)  # fed by another part of the view
                if not self.contains(r):
                    yield r, self.external_value(r)
            else:
                yield p, outer

    def with_opcode(self, *opcodes: str) -> list[HloInstruction]:
        """The nodes of `opcodes`, part by part (each fused computation's opcode index, so the
        answer costs what it holds, not the size of the view)."""
        # a part's parameters and root tuple are its only nodes outside the view
        outside = "parameter" in opcodes or "tuple" in opcodes
        out: list[HloInstruction] = []
        for p in self.parts:
            if p.comp is None:
                if p.instr.opcode in opcodes:
                    out.append(p.instr)
                continue
            found = p.comp.with_opcode(*opcodes)
            if outside:
                found = [i for i in found if self.contains(i)]
            out.extend(found)
        return out


__all__ = ["FusionAdaptor"]
