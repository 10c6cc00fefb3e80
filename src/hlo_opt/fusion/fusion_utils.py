"""Building fusions: wrap one instruction in a fusion, fuse a producer into a consumer (XLA's
`HloComputation::CreateFusionInstruction`, `HloFusionInstruction::FuseInstruction` and
`MergeFusionInstruction`). Priority fusion (`hlo_opt.passes.priority_fusion`) and multi-output
fusion and normalization fusion build their fusions with these.

Names follow XLA before `rename_fusions`: the fusion instruction `fusion` (`fusion.N`), its
computation `fused_computation` (`fused_computation.N`), parameters `param_0`, `param_1`, ... in
operand order, and fused clones named after the original through one module-wide `NameUniquer`,
so the same input always gives the same names.

    >>> editor = FusionEditor(module)                   # one uniquer for many edits
    >>> fusion = editor.wrap_in_fusion(add, "kLoop")     # fusion(add's operands), calls=fused_computation
    >>> fusion = editor.fuse_producer_into_consumer(exp, fusion, "kLoop")
    >>> editor.flush()                                  # drop computations of fusions merged away

A fusion's operands are distinct: an operand read twice becomes one parameter. A producer that
still has users after the fusion (other consumers, or the root) stays where it is; a producer
left without users is removed (a fusion producer's body is inlined, its computation dropped).

Large fusions are moved, not cloned: when a fusion producer of at least MOVE_MIN_INSTRUCTIONS
instructions, larger than the consumer's body, dies by the step, its fused computation becomes
the result's and the consumer's instructions join it (`MoveRecord` says what moved, for the cost
model's incremental update). XLA clones (MergeFusionInstruction), which makes a chain of n ops
that priority fusion grows one op at a time cost n^2/2 clones; moving keeps it linear. The
moved instructions keep their names (a clone gets the next `.N`), the only visible difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlo_common.errors import VerificationError
from hlo_common.hlo.hlo_utils import NameUniquer, relay_control_dependencies
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule

FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom")
MOVE_MIN_INSTRUCTIONS = 64


@dataclass
class MoveRecord:
    """What a moving fusion step did (`FusionEditor.last_move`): the producer's fused computation
    became `fusion`'s; `consumer_nodes` are the instructions that came from the consumer (post
    order, parameters excluded); `absorbed` maps a parameter of the result to the producer's
    parameter it replaced (both read the same operand); `producer_root` is the producer's root."""

    fusion: HloInstruction
    producer_root: HloInstruction
    consumer_nodes: list[HloInstruction]
    absorbed: dict[HloInstruction, HloInstruction] = field(default_factory=dict)


@dataclass
class GrowRecord:
    """What a step that cloned a producer into an existing fusion did (`FusionEditor.last_grow`):
    `new_nodes` are the clones (post order), `producer_root` the clone of the producer's result,
    `removed_param` the consumer's parameter that read the producer (now gone)."""

    fusion: HloInstruction
    producer_root: HloInstruction
    new_nodes: list[HloInstruction]
    removed_param: HloInstruction


class FusionEditor:
    """The fusion edits of one pass run over one module: a shared name uniquer, and the fused
    computations that became unreachable, removed from the module in one sweep by `flush`."""

    def __init__(self, module: HloModule, uniquer: NameUniquer | None = None):
        self.module = module
        self.uniquer = uniquer if uniquer is not None else NameUniquer.for_module(module)
        self._dead: set[HloComputation] = set()
        self.last_move: MoveRecord | None = None  # set by the last fuse_producer_into_consumer
        self.last_grow: GrowRecord | None = None  # likewise, when it cloned into a fusion
        self._caller_at: dict[HloComputation, int] = {}  # a caller's index in the module's list

    # -- public edits ---------------------------------------------------------------------------
    def wrap_in_fusion(self, instr: HloInstruction, kind: str = "kLoop") -> HloInstruction:
        """Replace `instr` by a fusion of `kind` whose computation holds a clone of it; the
        fusion reads `instr`'s distinct operands and takes its place (and its users, root slot,
        control edges and metadata)."""
        _check_kind(kind)
        comp = instr.parent
        if comp is None:
            raise ValueError(f"%{instr.name} is not in a computation")
        if instr.opcode == "parameter":
            raise ValueError(f"cannot fuse parameter %{instr.name}")
        body = HloComputation(self.uniquer.unique("fused_computation"))
        body.execution_thread = comp.execution_thread
        operands = list(dict.fromkeys(instr.operands))
        params = {}
        for i, op in enumerate(operands):
            params[op] = _add_parameter(body, i, op)
        inner = instr.clone(new_operands=[params[o] for o in instr.operands],
                            name=self.uniquer.unique(instr.name))
        body.add_instruction(inner)
        body.root = inner
        self._add_computation(body, comp)
        return self._fusion_in_place_of(instr, operands, kind, body)

    def _fusion_in_place_of(self, instr: HloInstruction, operands: list[HloInstruction], kind: str,
                            body: HloComputation) -> HloInstruction:
        """A fusion of `kind` calling `body` on `operands`, named as XLA names it, takes `instr`'s
        place: its users, root slot, control edges, metadata, frontend attributes and sharding."""
        comp = instr.parent
        fusion = HloInstruction(comp.unique_name(self.uniquer.unique("fusion")), "fusion", instr.shape,
                                operands, {"kind": kind, "calls": body})
        self.uniquer.taken.add(fusion.name)
        fusion.metadata = list(instr.metadata)
        fusion.frontend_attributes = list(instr.frontend_attributes)
        fusion.sharding = instr.sharding
        comp.replace_instruction(instr, fusion, remove_dead_operands=False)
        return fusion

    def fuse_producer_into_consumer(self, producer: HloInstruction, consumer: HloInstruction,
                                    kind: str | None = None) -> HloInstruction:
        """Fuse `producer` (an instruction or a single-output fusion) into `consumer` (an
        instruction, wrapped first, or a fusion). Returns the consumer fusion, whose kind becomes
        `kind` when given. The producer stays if it still has users, else it is removed."""
        if producer not in consumer.operands:
            raise ValueError(f"%{producer.name} is not an operand of %{consumer.name}")
        if producer.shape.is_tuple:
            raise ValueError(f"cannot fuse %{producer.name}: a tuple-shaped producer "
                             "(multi-output fusion is not done by producer-consumer fusion)")
        if producer.opcode == "parameter":
            raise ValueError(f"cannot fuse parameter %{producer.name}")
        if kind is not None:
            _check_kind(kind)
        self.last_move = self.last_grow = None
        if self._should_move(producer, consumer):
            return self._fuse_by_moving(producer, consumer, kind)
        fusion = consumer
        grows = consumer.opcode == "fusion"
        if not grows:
            fusion = self.wrap_in_fusion(consumer, kind or "kLoop")
        elif kind is not None:
            fusion.attrs["kind"] = kind
        body = fusion.fused_computation()
        slots = [i for i, op in enumerate(fusion.operands) if op is producer]
        producer_params = [body.parameter(i) for i in slots]
        clones: list[HloInstruction] = []
        replacement = self._clone_producer_into(producer, fusion, body, clones)
        for param in producer_params:
            param.replace_all_uses_with(replacement)
        _remove_parameters(fusion, body, slots)
        self._remove_if_dead(producer, fusion)
        if grows and len(producer_params) == 1:
            self.last_grow = GrowRecord(fusion, replacement, clones, producer_params[0])
        return fusion

    # -- moving a large producer's body instead of cloning it ------------------------------------
    @staticmethod
    def _should_move(producer: HloInstruction, consumer: HloInstruction) -> bool:
        if producer.opcode != "fusion" or producer.has_side_effect:
            return False
        comp = producer.parent
        if comp is None or comp.root is producer or producer.control_predecessors \
                or producer.control_successors or any(u is not consumer for u in producer.users):
            return False
        body = producer.fused_computation()
        if body.root.opcode == "tuple":
            return False
        size = body.instruction_count()
        target = consumer.fused_computation().instruction_count() if consumer.opcode == "fusion" else 1
        return size >= MOVE_MIN_INSTRUCTIONS and size > target

    def _fuse_by_moving(self, producer: HloInstruction, consumer: HloInstruction,
                        kind: str | None) -> HloInstruction:
        """The step of `fuse_producer_into_consumer` with the producer's body taken over whole."""
        body = producer.fused_computation()
        old_body = consumer.fused_computation() if consumer.opcode == "fusion" else None
        if old_body is None:
            body.name = self.uniquer.unique("fused_computation")
            c_params: dict[HloInstruction, HloInstruction] = {}
        else:
            body.name = old_body.name
            c_params = {consumer.operands[p.parameter_number]: p for p in old_body.parameters}
        record = MoveRecord(consumer, body.root, [])
        operands, param_of = _moved_parameters(producer, consumer, body, c_params, record)
        if old_body is None:
            fusion = self._moved_into_new_fusion(producer, consumer, body, operands, param_of, kind, record)
        else:
            fusion = consumer
            record.consumer_nodes = [i for i in old_body.post_order() if i.opcode != "parameter"]
            old_body.parameter(consumer.operands.index(producer)).replace_all_uses_with(body.root)
            for instr in record.consumer_nodes:
                body.add_instruction(instr)
            body.root = old_body.root
            fusion.set_operands(operands)
            fusion.attrs["calls"] = body
            if kind is not None:
                fusion.attrs["kind"] = kind
            self._discard(old_body, keep=record.consumer_nodes)
        for k, o in enumerate(operands):
            param = param_of[o]
            param.parameter_number = k
            param.name = f"param_{k}"
        producer.parent.remove_instruction(producer)
        self.last_move = record
        return fusion

    def _moved_into_new_fusion(self, producer: HloInstruction, consumer: HloInstruction, body: HloComputation,
                               operands: list, param_of: dict, kind: str | None,
                               record: MoveRecord) -> HloInstruction:
        """A plain consumer joins the producer's body as its root; the fusion takes its place (the
        names and attributes `wrap_in_fusion` would give)."""
        clone = consumer.clone(new_operands=[body.root if o is producer else param_of[o] for o in consumer.operands],
                               name=self.uniquer.unique(consumer.name))
        body.add_instruction(clone)
        body.root = clone
        record.consumer_nodes = [clone]
        record.fusion = self._fusion_in_place_of(consumer, operands, kind or "kLoop", body)
        return record.fusion

    def _discard(self, body: HloComputation, keep=()) -> None:
        """`body` is dead (its fusion is gone, its instructions cloned elsewhere, or `keep`
        moved elsewhere): it leaves the module at `flush`, and its own instructions are taken
        apart now, so that they are freed at once rather than left as cycles for the collector."""
        self._dead.add(body)
        kept = set(keep)
        for instr in body.instructions:
            if instr not in kept and instr.parent is body:
                instr.operands = []
                instr.users = []
                instr._user_set = set()
                instr.parent = None
        body.instructions = []
        body._list.owner = None  # nor the computation <-> list cycle (nothing edits a dead body)
        body._names.clear()
        body.root = None

    def flush(self) -> None:
        """Remove the computations of fusions merged into others (one pass over the module)."""
        if self._dead:
            dead = self._dead
            self.module.computations = [c for c in self.module.computations if c not in dead]
            for c in dead:
                c.parent = None
            self._dead = set()

    # -- helpers --------------------------------------------------------------------------------
    def _add_computation(self, body: HloComputation, caller: HloComputation) -> None:
        """Put `body` right before the computation that calls it (callees before callers)."""
        comps = self.module.computations
        body.parent = self.module
        at = self._caller_at.get(caller)  # where the caller was last time: it moved one down
        if at is None or at >= len(comps) or comps[at] is not caller:
            try:
                at = comps.index(caller)
            except ValueError:
                comps.append(body)
                return
        comps.insert(at, body)
        self._caller_at[caller] = at + 1

    def _fusion_parameter_for(self, fusion: HloInstruction, body: HloComputation,
                              operand: HloInstruction, extra: dict) -> HloInstruction:
        """The parameter of `body` that reads `operand`, added (with a new fusion operand) when
        the fusion does not read it yet."""
        if operand in extra:
            return extra[operand]
        for i, op in enumerate(fusion.operands):
            if op is operand:
                extra[operand] = body.parameter(i)
                return extra[operand]
        param = _add_parameter(body, len(fusion.operands), operand)
        fusion.append_operand(operand)
        extra[operand] = param
        return param

    def _clone_producer_into(self, producer: HloInstruction, fusion: HloInstruction,
                             body: HloComputation, clones: list[HloInstruction]) -> HloInstruction:
        """Clone `producer` (or inline its fused body) into `body`; returns the clone of its
        result (`clones` gets every clone, in post order). New fusion operands (the producer's
        operands it did not read yet) come last."""
        found: dict[HloInstruction, HloInstruction] = {}
        if producer.opcode != "fusion":
            operands = [self._fusion_parameter_for(fusion, body, o, found) for o in producer.operands]
            clone = producer.clone(new_operands=operands, name=self.uniquer.unique(producer.name))
            clones.append(clone)
            return body.add_instruction(clone, before=_first_non_parameter(body))
        inner = producer.fused_computation()
        anchor = _first_non_parameter(body)  # clones go first, after the parameters
        mapping: dict[int, HloInstruction] = {}
        for param in inner.parameters:
            outer = producer.operands[param.parameter_number]
            mapping[id(param)] = self._fusion_parameter_for(fusion, body, outer, found)
        for instr in inner.post_order():
            if instr.opcode == "parameter":
                continue
            clone = instr.clone(new_operands=[mapping[id(o)] for o in instr.operands],
                                name=self.uniquer.unique(instr.name))
            clones.append(clone)
            mapping[id(instr)] = body.add_instruction(clone, before=anchor)
        return mapping[id(inner.root)]

    def _remove_if_dead(self, producer: HloInstruction, fusion: HloInstruction) -> None:
        comp = producer.parent
        if comp is None or producer.users or producer is comp.root or producer.has_side_effect:
            return
        relay_control_dependencies(producer, fusion)
        comp.remove_instruction(producer)
        if producer.opcode == "fusion":
            self._discard(producer.attrs["calls"])


# -- module-level forms (one edit each; a pass making many should share one FusionEditor) --------
def wrap_in_fusion(instr: HloInstruction, kind: str = "kLoop") -> HloInstruction:
    """A fusion of `kind` holding `instr` alone, in `instr`'s place."""
    editor = FusionEditor(_module_of(instr))
    fusion = editor.wrap_in_fusion(instr, kind)
    editor.flush()
    return fusion


def fuse_producer_into_consumer(producer: HloInstruction, consumer: HloInstruction,
                                kind: str | None = None) -> HloInstruction:
    """Fuse `producer` into `consumer` (see `FusionEditor.fuse_producer_into_consumer`)."""
    editor = FusionEditor(_module_of(consumer))
    fusion = editor.fuse_producer_into_consumer(producer, consumer, kind)
    editor.flush()
    return fusion


def verify_fusion_step(fusion: HloInstruction, step: str, caller: HloComputation | None = None) -> None:
    """The check a fusion pass makes after each step under `--verify-each`: the fused computation's
    parameters and root match the fusion's operands and shape, and it (and `caller`, when given)
    verify. Else one VerificationError line: `{step} breaks the verifier: {what}`, `step` naming the
    pass, producer, consumer and rule."""
    from hlo_common.hlo.verifier import verify_computation

    body = fusion.fused_computation()
    try:
        params = body.parameters
        if len(params) != len(fusion.operands):
            raise VerificationError(f"fusion %{fusion.name} has {len(fusion.operands)} operands but its "
                                    f"computation {body.name} has {len(params)} parameters")
        for param, op in zip(params, fusion.operands):
            if param.shape != op.shape:
                raise VerificationError(f"parameter {param.parameter_number} of {body.name} is "
                                        f"{param.shape}, the operand %{op.name} is {op.shape}")
        if body.root.shape != fusion.shape:
            raise VerificationError(f"fusion %{fusion.name} is {fusion.shape} but the root of "
                                    f"{body.name} is {body.root.shape}")
        verify_computation(body)
        if caller is not None:
            verify_computation(caller)
    except VerificationError as exc:
        raise VerificationError(f"{step} breaks the verifier: {exc.one_line()}") from exc


def _module_of(instr: HloInstruction) -> HloModule:
    if instr.parent is None or instr.parent.parent is None:
        raise ValueError(f"%{instr.name} is not in a module")
    return instr.parent.parent


def _check_kind(kind: str) -> None:
    if kind not in FUSION_KINDS:
        raise ValueError(f"unknown fusion kind '{kind}' (expected one of {', '.join(FUSION_KINDS)})")


def _moved_parameters(producer: HloInstruction, consumer: HloInstruction, body: HloComputation,
                      c_params: dict, record: MoveRecord) -> tuple[list, dict]:
    """The moved fusion's operands (the consumer's but the producer, then the producer's new ones)
    and a parameter of `body` for each: an operand both read keeps the parameter with more users
    (the other's users move to it; `record.absorbed` notes a producer parameter that went)."""
    operands = [o for o in dict.fromkeys(consumer.operands) if o is not producer]
    p_params = {producer.operands[p.parameter_number]: p for p in body.parameters}
    param_of: dict[HloInstruction, HloInstruction] = {}
    for o in operands:
        mine = c_params.get(o)
        theirs = p_params.get(o)
        if mine is None:  # a plain consumer's operand: the producer's parameter, or a new one
            param_of[o] = theirs if theirs is not None else _add_parameter(body, len(p_params) + len(param_of),
                                                                            o, append=True)
        elif theirs is not None and len(theirs.users) >= len(mine.users):
            mine.replace_all_uses_with(theirs)
            param_of[o] = theirs
        else:
            body.add_instruction(mine)
            if theirs is not None:
                theirs.replace_all_uses_with(mine)
                body.remove_instruction(theirs)
                record.absorbed[mine] = theirs
            param_of[o] = mine
    for o in producer.operands:
        if o not in param_of:
            operands.append(o)
            param_of[o] = p_params[o]
    return operands, param_of


def _add_parameter(body: HloComputation, number: int, operand: HloInstruction,
                   append: bool = False) -> HloInstruction:
    """A parameter for `operand`, after the others (or, with `append`, at the end: no walk of a
    large body to find the first non-parameter)."""
    param = HloInstruction(f"param_{number}", "parameter", operand.shape)
    param.parameter_number = number
    return body.add_instruction(param, before=None if append else _first_non_parameter(body))


def _first_non_parameter(body: HloComputation) -> HloInstruction | None:
    return body.first_non_parameter()


def _remove_parameters(fusion: HloInstruction, body: HloComputation, slots: list[int]) -> None:
    """Drop the (now unused) parameters at `slots` and the matching fusion operands, then number
    the remaining parameters `param_0..` in operand order again."""
    if not slots:
        return
    drop = set(slots)
    params = body.parameters
    for i in slots:
        body.remove_instruction(params[i])
    fusion.set_operands([op for i, op in enumerate(fusion.operands) if i not in drop])
    kept = [p for i, p in enumerate(params) if i not in drop]
    for k, param in enumerate(kept):
        if param.parameter_number != k:
            param.parameter_number = k
            param.name = f"param_{k}"
