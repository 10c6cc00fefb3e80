"""The HLO verifier: IR invariants checked after parsing and after every pass (`--verify-each`).

XLA's HloVerifier (`xla/service/hlo_verifier.cc`) in Python: structure (parents, operand/user
lists, names, parameter numbers, roots, acyclicity, schedule order), operand counts from the
opcode table, called computations (in the module, allowed for the opcode, fitting signatures),
layouts, declared shapes against `shape_inference.infer_shape`, async/copy start-done pairing,
fusion and entry-layout consistency. Linear in the size of the module.

Every failure is a `VerificationError(message, computation, instruction)` whose message says what
was found and what was expected.

    >>> from hlo_common.hlo.parser import parse_module
    >>> verify_module(parse_module("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }"))
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.errors import VerificationError
from hlo_common.hlo.ir import COMPUTATION_ATTRS, HloComputation, HloInstruction, HloModule
from hlo_common.hlo.opcodes import OPCODES
from hlo_common.hlo.parser_scanner import array_size_problem
from hlo_common.hlo.replica_groups import check_groups, group_mode
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.sharding import ShardingError
from hlo_common.hlo.shape_inference import InferenceContext, infer_shape
from hlo_common.hlo.shape_inference._base import describe

# Which computation-valued attributes each opcode may carry (others may carry none).
CALLED_COMPUTATION_ATTRS: dict[str, frozenset[str]] = {
    **{op: frozenset({"to_apply"}) for op in (
        "call", "map", "reduce", "reduce-window", "scatter", "sort", "all-reduce", "all-reduce-start",
        "reduce-scatter", "scan")},
    **{op: frozenset({"calls"}) for op in ("fusion", "async-start", "async-update", "async-done")},
    "custom-call": frozenset({"calls", "to_apply", "called_computations"}),
    "while": frozenset({"condition", "body"}),
    "conditional": frozenset({"true_computation", "false_computation", "branch_computations"}),
    "select-and-scatter": frozenset({"select", "scatter"}),
}

# Opcodes whose shape must match exactly, never up to floating-point precision (XLA's CheckShape).
_EXACT_SHAPE = frozenset({
    "bitcast", "call", "conditional", "constant", "copy-done", "copy-start", "custom-call",
    "get-tuple-element", "infeed", "outfeed", "opt-barrier", "parameter", "recv", "recv-done", "send",
    "send-done", "tuple", "while", "dynamic-update-slice",
})

# Opcodes that may mix floating-point precisions among their operands (CheckMixedPrecisionOperands).
_MIXED_PRECISION_OK = frozenset({
    "call", "conditional", "constant", "convolution", "dot", "all-reduce", "all-reduce-start",
    "all-reduce-done", "all-gather", "all-gather-start", "all-gather-done", "async-done", "async-update",
    "async-start", "copy-done", "copy-start", "custom-call", "domain", "fusion", "get-tuple-element",
    "opt-barrier", "infeed", "outfeed", "parameter", "recv", "recv-done", "reduce-precision",
    "reduce-window", "send", "send-done", "sort", "tuple", "while", "ragged-dot", "scaled-dot",
    "convert", "bitcast-convert", "stochastic-convert",
})

# Start/done pairs: the single user a start op must have, and the operand a done op must read.
_SINGLE_USER = {
    "async-start": ("async-update", "async-done"), "async-update": ("async-update", "async-done"),
    "all-reduce-start": ("all-reduce-done",), "copy-start": ("copy-done",),
    "collective-permute-start": ("collective-permute-done",),
}
_SINGLE_OPERAND = {
    "async-update": ("async-start", "async-update"), "async-done": ("async-start", "async-update"),
    "all-reduce-done": ("all-reduce-start",), "copy-done": ("copy-start",),
    "collective-permute-done": ("collective-permute-start",),
    "send-done": ("send", "get-tuple-element"), "recv-done": ("recv", "get-tuple-element"),
}


_COMPUTATION_ATTR_SET = frozenset(COMPUTATION_ATTRS)


@dataclass(frozen=True)
class VerifierOptions:
    layout_sensitive: bool = False  # compare layouts where XLA's layout-sensitive verifier does
    allow_mixed_precision: bool = False  # accept f32/bf16 mixes like XLA's allow_mixed_precision


def verify_module(module: HloModule, *, layout_sensitive: bool = False,
                  allow_mixed_precision: bool = False) -> None:
    """Raise VerificationError for the first broken invariant of `module`; return None if sound."""
    opts = VerifierOptions(layout_sensitive, allow_mixed_precision)
    _ModuleVerifier(module, opts).run()


def verify_computation(comp: HloComputation, module: HloModule | None = None, *,
                       layout_sensitive: bool = False, allow_mixed_precision: bool = False) -> None:
    """Verify one computation (its module, if given or known, supplies the computation set)."""
    module = module if module is not None else comp.parent
    opts = VerifierOptions(layout_sensitive, allow_mixed_precision)
    _ModuleVerifier(module, opts).verify_computation(comp)


def _err(message: str, comp: HloComputation | None, instr: HloInstruction | None = None):
    source = getattr(instr, "source", None)
    return VerificationError(message, comp.name if comp is not None else None,
                             instr.name if instr is not None else None,
                             source[0].place(source[1]) if source is not None else None)


class _ModuleVerifier:
    def __init__(self, module: HloModule | None, opts: VerifierOptions):
        self.module = module
        self.opts = opts
        self.ctx = InferenceContext.for_module(module)
        comps = module.computations if module is not None else []
        self.comp_ids = {id(c) for c in comps}
        self._good_layouts: set[tuple[tuple[int, ...], int]] = set()
        self._sized: dict[int, Shape] = {}  # id -> shape whose arrays fit in int64 bytes

    # -- module level -------------------------------------------------------------------------------
    def run(self) -> None:
        m = self.module
        if m.entry is None or id(m.entry) not in self.comp_ids:
            raise VerificationError(f"module {m.name}: found an entry computation outside the module's "
                                    "computation list, expected one of its computations")
        names: dict[str, HloComputation] = {}
        for comp in m.computations:
            if comp.parent is not m:
                raise _err("found a parent other than the module that lists it, expected that module", comp)
            if comp.name in names:
                raise _err(f"found the computation name {comp.name} twice, expected unique names", comp)
            names[comp.name] = comp
        fused = self._fusion_computations()
        if id(m.entry) in fused:
            raise _err("found the entry computation called by a fusion, expected a non-fused entry", m.entry)
        for comp in m.computations:
            self.verify_computation(comp, fused_by=fused.get(id(comp)))
        self._verify_entry_layout()

    def _fusion_computations(self) -> dict[int, HloInstruction]:
        out = {}
        for comp in self.module.computations:
            for instr in comp.instructions:
                if instr.opcode == "fusion":
                    callee = instr.attrs.get("calls")
                    if isinstance(callee, HloComputation):
                        out[id(callee)] = instr
        return out

    def _verify_entry_layout(self) -> None:
        m = self.module
        if m.entry_computation_layout is None:
            return
        params, result = m.entry_computation_layout
        entry = m.entry
        actual = entry.parameters
        if len(params) != len(actual):
            raise _err(f"found {len(params)} parameters in entry_computation_layout, expected "
                       f"{len(actual)} (the entry computation's)", entry)
        for p, declared in zip(actual, params):
            if not self._same(p.shape, declared, exact=True, layouts=True):
                raise _err(f"found parameter {p.parameter_number} {p.shape}, expected {declared} as "
                           "entry_computation_layout says", entry, p)
        if not self._same(entry.root.shape, result, exact=True, layouts=True):
            raise _err(f"found root shape {entry.root.shape}, expected {result} as "
                       "entry_computation_layout says", entry, entry.root)

    # -- computation level --------------------------------------------------------------------------
    def verify_computation(self, comp: HloComputation, fused_by: HloInstruction | None = None) -> None:
        members = {id(i): k for k, i in enumerate(comp.instructions)}  # id -> text position
        self._verify_structure(comp, members)
        self._verify_edges(comp, members)
        self._verify_order(comp, members)
        for instr in comp.instructions:
            self._verify_instruction(comp, instr)
        if fused_by is not None:
            self._verify_fused(comp)

    def _verify_structure(self, comp: HloComputation, members: dict[int, int]) -> None:
        if not comp.instructions:
            raise _err("found no instructions, expected at least one", comp)
        if comp.root is None or id(comp.root) not in members:
            name = comp.root.name if comp.root is not None else "none"
            raise _err(f"found root %{name}, which is not one of its instructions; expected its own "
                       "instruction", comp, comp.root)
        names: set[str] = set()
        numbers: list[int] = []
        for instr in comp.instructions:
            if instr.parent is not comp:
                raise _err("found a parent other than the computation that lists it, expected that "
                           "computation", comp, instr)
            if instr.name in names:
                raise _err(f"found the name {instr.name} twice in the computation, expected unique names",
                           comp, instr)
            names.add(instr.name)
            if instr.opcode == "parameter":
                if instr.parameter_number is None:
                    raise _err("found a parameter without a number, expected parameter(N)", comp, instr)
                numbers.append(instr.parameter_number)
        if sorted(numbers) != list(range(len(numbers))):
            raise _err(f"found parameter numbers {sorted(numbers)}, expected 0..{len(numbers) - 1} each once",
                       comp)

    def _verify_edges(self, comp: HloComputation, members: dict[int, int]) -> None:
        """Operand, user and control lists agree with each other and stay in the computation."""
        uses: set[tuple[int, int]] = set()
        for instr in comp.instructions:
            for i, op in enumerate(instr.operands):
                if id(op) not in members:
                    where = op.parent.name if op.parent is not None else "no computation"
                    raise _err(f"found operand {i} %{op.name} in {where}, expected an instruction of this "
                               "computation", comp, instr)
                uses.add((id(op), id(instr)))
        listed: set[tuple[int, int]] = set()
        for instr in comp.instructions:
            for user in instr.users:
                key = (id(instr), id(user))
                if id(user) not in members:
                    where = user.parent.name if user.parent is not None else "no computation"
                    raise _err(f"found user %{user.name} in {where}, expected users in this computation",
                               comp, instr)
                if key not in uses:
                    raise _err(f"found %{user.name} in its users, but %{user.name} does not use it; expected "
                               "users and operands to agree", comp, instr)
                if key in listed:
                    raise _err(f"found %{user.name} twice in its users, expected each user once", comp, instr)
                listed.add(key)
            for pred in instr.control_predecessors:
                if id(pred) not in members or instr not in pred.control_successors:
                    raise _err(f"found control predecessor %{pred.name}, which does not list it as a "
                               "successor; expected both lists to agree", comp, instr)
        if len(listed) != len(uses):
            for instr in comp.instructions:
                for op in instr.operands:
                    if (id(op), id(instr)) not in listed:
                        raise _err(f"found operand %{op.name}, whose users do not include it; expected "
                                   "users and operands to agree", comp, instr)

    def _verify_order(self, comp: HloComputation, position: dict[int, int]) -> None:
        """Scheduled modules: operands come first in text order. Otherwise no cycles: text order that
        is already topological proves it in one pass; only other orders need the DFS."""
        scheduled = self.module is not None and self.module.is_scheduled
        in_order = True
        for k, instr in enumerate(comp.instructions):
            deps = instr.operands
            if instr.control_predecessors:
                deps = (*deps, *instr.control_predecessors)
            for dep in deps:
                if position[id(dep)] >= k:
                    if scheduled:
                        raise _err(f"found a use of %{dep.name} before its definition; expected operands "
                                   "first because the module is scheduled", comp, instr)
                    in_order = False
        if not in_order:
            self._find_cycle(comp)

    @staticmethod
    def _find_cycle(comp: HloComputation) -> None:
        state: dict[int, int] = {}  # 1 = on the DFS stack, 2 = done
        for start in comp.instructions:
            if id(start) in state:
                continue
            stack = [(start, iter((*start.operands, *start.control_predecessors)))]
            state[id(start)] = 1
            while stack:
                node, deps = stack[-1]
                for dep in deps:
                    s = state.get(id(dep))
                    if s == 1:
                        raise _err(f"found a cycle through %{dep.name}, expected an acyclic graph",
                                   comp, node)
                    if s is None:
                        state[id(dep)] = 1
                        stack.append((dep, iter((*dep.operands, *dep.control_predecessors))))
                        break
                else:
                    state[id(node)] = 2
                    stack.pop()

    def _verify_fused(self, comp: HloComputation) -> None:
        for instr in comp.instructions:
            if instr is not comp.root and not instr.users:
                raise _err("found an instruction without users in a fused computation, expected every "
                           "non-root instruction to be used", comp, instr)

    # -- instruction level --------------------------------------------------------------------------
    def _verify_instruction(self, comp: HloComputation, instr: HloInstruction) -> None:
        info = OPCODES.get(instr.opcode)
        if info is None:
            raise _err(f"found unknown opcode '{instr.opcode}', expected one of the opcode table",
                       comp, instr)
        if info.arity is not None and len(instr.operands) != info.arity:
            raise _err(f"found {len(instr.operands)} operands, expected {info.arity} for {instr.opcode}",
                       comp, instr)
        if instr.shape is None:
            raise _err("found no shape, expected one", comp, instr)
        if id(instr.shape) not in self._sized:
            for _, leaf in instr.shape.leaf_shapes():
                problem = array_size_problem(leaf)
                if problem is not None:
                    raise _err(problem, comp, instr)
            self._sized[id(instr.shape)] = instr.shape  # kept, so that the id stays unique
        self._verify_layout(comp, instr, instr.shape)
        self._verify_called(comp, instr)
        inferred = infer_shape(instr, self.ctx)
        if not self._same(instr.shape, inferred, exact=instr.opcode in _EXACT_SHAPE):
            raise _err(f"declared shape does not match the one inferred from its operands and attributes: "
                       f"found {describe(instr.shape)}, expected {describe(inferred)}", comp, instr)
        if not self.opts.allow_mixed_precision and instr.opcode not in _MIXED_PRECISION_OK:
            self._verify_single_precision(comp, instr)
        self._verify_pairing(comp, instr)
        if "replica_groups" in instr.attrs:
            self._verify_replica_groups(comp, instr)
        if instr.sharding is not None:
            self._verify_sharding(comp, instr)

    def _verify_replica_groups(self, comp: HloComputation, instr: HloInstruction) -> None:
        """No id twice; where the header gives the device counts, every id of the group mode in
        range and (for non-empty groups) each one named (XLA's CheckReplicaGroups)."""
        raw = instr.attrs["replica_groups"]
        if not hasattr(raw, "groups"):
            return
        m = self.module
        declared = m is not None and any(m.header_attr(k) is not None for k in ("replica_count", "num_partitions"))
        try:
            if declared:
                check_groups(instr, self.ctx.replica_count, self.ctx.num_partitions)
            else:
                seen: set[int] = set()
                for d in (d for g in raw.groups() for d in g):
                    if d in seen:
                        raise ValueError(f"replica_groups name id {d} twice")
                    seen.add(d)
        except ValueError as exc:
            raise _err(f"{exc} ({group_mode(instr)} mode)", comp, instr) from None

    def _verify_sharding(self, comp: HloComputation, instr: HloInstruction) -> None:
        """XLA's HloSharding::Validate against the shape, and against the device count when the
        module states num_partitions."""
        devices = self.ctx.num_partitions if self.ctx.num_partitions > 1 else None
        try:
            instr.sharding.validate(instr.shape, devices)
        except ShardingError as exc:
            raise _err(f"invalid sharding: {exc}", comp, instr) from None

    def _verify_layout(self, comp, instr, shape: Shape) -> None:
        if shape.tuple_shapes is not None:
            for s in shape.tuple_shapes:
                self._verify_layout(comp, instr, s)
            return
        if shape.layout is None:
            return
        m2m = shape.layout.minor_to_major
        key = (m2m, len(shape.dims))
        if key in self._good_layouts:
            return
        if sorted(m2m) == list(range(shape.rank)):
            self._good_layouts.add(key)
        else:
            raise _err(f"found layout {{{','.join(map(str, m2m))}}} on {describe(shape)}, expected a "
                       f"permutation of its {shape.rank} dimensions", comp, instr)

    def _verify_called(self, comp: HloComputation, instr: HloInstruction) -> None:
        if not instr.attrs:
            return
        allowed = CALLED_COMPUTATION_ATTRS.get(instr.opcode, frozenset())
        for key in _COMPUTATION_ATTR_SET.intersection(instr.attrs):
            value = instr.attrs[key]
            if value is None:
                continue
            if key not in allowed:
                raise _err(f"found {key}= on {instr.opcode}, expected "
                           f"{', '.join(sorted(allowed)) or 'no called computations'}", comp, instr)
            for callee in value if isinstance(value, list) else [value]:
                if not isinstance(callee, HloComputation) or (
                        self.module is not None and id(callee) not in self.comp_ids):
                    name = getattr(callee, "name", callee)
                    raise _err(f"found {key}={name}, which is not in the module; expected a computation of "
                               "the module", comp, instr)
                if callee is comp:
                    raise _err(f"found {key}= naming its own computation {comp.name}, expected another one",
                           comp, instr)

    def _verify_single_precision(self, comp: HloComputation, instr: HloInstruction) -> None:
        seen = None
        for op in instr.operands:
            leaves = (op.shape,) if op.shape.tuple_shapes is None else [s for _, s in op.shape.leaf_shapes()]
            for leaf in leaves:
                et = leaf.element_type
                if et is None or not et.is_float:
                    continue
                if seen is None:
                    seen = et
                elif et is not seen:
                    raise _err(f"found floating-point types {seen.name} and {et.name} among its operands, "
                               "expected one precision (mixed precision is not allowed)", comp, instr)

    def _verify_pairing(self, comp: HloComputation, instr: HloInstruction) -> None:
        want_users = _SINGLE_USER.get(instr.opcode)
        if want_users is not None:
            users = instr.users
            if len(users) != 1 or users[0].opcode not in want_users:
                found = ", ".join(f"%{u.name} ({u.opcode})" for u in users) or "none"
                raise _err(f"found users: {found}; expected exactly one {' or '.join(want_users)} to "
                           f"complete the {instr.opcode}", comp, instr)
        want_operand = _SINGLE_OPERAND.get(instr.opcode)
        if want_operand is not None and instr.operands[0].opcode not in want_operand:
            op = instr.operands[0]
            raise _err(f"found operand %{op.name} ({op.opcode}), expected {' or '.join(want_operand)} "
                       f"to feed the {instr.opcode}", comp, instr)

    # -- helpers ------------------------------------------------------------------------------------
    def _same(self, a: Shape, b: Shape, exact: bool, layouts: bool = False) -> bool:
        """Same element types and dimensions; layouts too only where both sides carry real layouts
        (the entry layout) and the verifier is layout sensitive, since inferred shapes have defaults."""
        if a is b:
            return True
        if self.opts.allow_mixed_precision and not exact:
            return _compatible_ignoring_fp(a, b)
        if not a.compatible(b):
            return False
        return not (self.opts.layout_sensitive and layouts) or _same_layouts(a, b)


def _compatible_ignoring_fp(a: Shape, b: Shape) -> bool:
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(_compatible_ignoring_fp(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    if a.dims != b.dims:
        return False
    ea, eb = a.element_type, b.element_type
    return ea is eb or (ea.is_float and eb.is_float)


def _same_layouts(a: Shape, b: Shape) -> bool:
    if a.is_tuple:
        return all(_same_layouts(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    return a.minor_to_major == b.minor_to_major
