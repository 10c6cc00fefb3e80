"""The reference interpreter's driver (XLA's HloEvaluator): walks a computation and calls handlers.

This sits at the bottom of every numeric check in the project: `hlo-run --platform interpreter`,
pass tests comparing a module before and after a rewrite, and emitter tests all evaluate HLO here.
Each opcode's behaviour lives in a handler registered in `registry.HANDLERS` (one module per
opcode family). This file runs evaluation plans (`plan.py`: each computation's steps worked out
once: handlers resolved, or specialized by `fast.py`, invariant values cached, large elementwise
runs chunked by `regions.py`), feeds handlers their operands, frees values after their last use
and turns failures into `InterpreterError`s that name the instruction.

Contract for handlers (`fn(instr, operands, ev) -> value`):
- operands (a list or tuple) and results are numpy arrays holding logical (row-major) elements
  in the element type's own dtype (`PrimitiveType.np_dtype`), Python tuples for tuple shapes,
  `TOKEN` for tokens;
- values are immutable: a handler may return a view of an operand but never writes into one,
  except an operand for which `ev.owns(value)` is true (donated: its last use, nothing else
  refers to it; dynamic-update-slice and scatter then update it in place);
- a handler evaluates called computations through `ev.call(computation, args)` and scalar
  computations (reducers, comparators, map functions, scatter combiners) over whole arrays through
  `ev.map_computation(computation, arrays)`.

    >>> m = parse_module("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }")
    >>> evaluate(m, [np.array([1, -2], np.float32)])
    array([-1.,  2.], dtype=float32)
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from hlo_common.errors import HloError, InterpreterError
from hlo_common.interpreter import blas, fast, heap
from hlo_common.interpreter.plan import ARRAY_CHECK, Plan
from hlo_common.interpreter.registry import HANDLERS, TOKEN
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape

# Handler modules, imported for their `register` side effects. The optional ones are written in
# parallel by another engineer; a module that does not exist yet is skipped, one that exists and
# fails to import is an error.
_HANDLER_MODULES = (
    "elementwise", "bitwise", "conversions", "data_movement", "control_flow", "rng", "custom_call",
    "collectives",
)
_OPTIONAL_HANDLER_MODULES = ("reduction", "linalg", "gather_scatter", "sort", "gemm", "cudnn_conv")


def _import_handlers() -> None:
    for name in _HANDLER_MODULES:
        importlib.import_module(f"hlo_common.interpreter.{name}")
    for name in _OPTIONAL_HANDLER_MODULES:
        full = f"hlo_common.interpreter.{name}"
        if importlib.util.find_spec(full) is not None:
            importlib.import_module(full)


# Opcodes allowed in a computation that `map_computation` evaluates with array-valued parameters.
_VECTORIZABLE_EXTRA = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "broadcast", "reshape", "bitcast", "copy",
    "call",
})


def _pass_through(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    return operands[0]


def _elementwise_bitcast(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """A bitcast in an elementwise computation is scalar to scalar; between element types of one
    width (XLA's sort comparators bitcast f32 to s32) it reinterprets the bits, as bitcast-convert."""
    src, dst = instr.operands[0].shape.element_type, instr.shape.element_type
    if src is dst:
        return operands[0]
    from hlo_common.interpreter.conversions import bitcast_convert_array

    return bitcast_convert_array(np.asarray(operands[0]), src, dst)


# Elementwise mode (see Evaluator.run_elementwise): shape ops pass their operand on (a bitcast
# between element types reinterprets it).
_ELEMENTWISE_MODE = {op: _pass_through for op in ("broadcast", "reshape", "copy")}
_ELEMENTWISE_MODE["bitcast"] = _elementwise_bitcast
_ELEMENTWISE_MODE["call"] = lambda instr, ops, ev: ev.run_elementwise(instr.attrs["to_apply"], ops)


class Evaluator:
    """Evaluates HLO modules and computations on numpy values, step by step of their plans.

    `replica_id` / `partition_id` are what replica-id / partition-id return (single-device runs
    use 0); `rng_seed` seeds the deterministic generator behind `rng`; `rng_state` is the 128-bit
    counter rng-get-and-update-state reads and advances (XLA starts it at 0x7012395).
    """

    # Plans let a reduce read the operand of the widening convert it alone reads, and compute a
    # reduce of an elementwise region's member inside the region (plan.py); an evaluator that
    # must see every instruction's value (hlo-run's bisector) turns both off.
    fold_converts = True

    def __init__(self, *, replica_id: int = 0, partition_id: int = 0, rng_seed: int = 0x5EED,
                 rng_state: int = 0x7012395, max_while_iterations: int | None = None):
        _import_handlers()
        heap.keep_freed_memory()
        self.max_while_iterations = max_while_iterations  # None: loops run until their condition fails
        self.replica_id = replica_id
        self.partition_id = partition_id
        self.rng_seed = rng_seed
        self.rng_state = self._first_rng_state = rng_state
        self._rng: np.random.Generator | None = None
        self.module: HloModule | None = None
        self._plans: dict[int, Plan] = {}
        self._vector_ok: dict[int, tuple] = {}  # id -> (computation, vectorizable?)
        self._donated: Any = None  # the operand the running handler may update in place
        self._active = False  # inside an evaluation session (see _session)
        self._verdicts: dict[tuple, tuple] = {}  # (kind, id) -> (computation, verdict)
        self.world = None  # devices.World when this is one of several devices (devices.run_devices)
        self.device = 0
        self.collective_seq: dict[int, int] = {}  # id(instr) -> how often this device ran it

    # -- public entry points ----------------------------------------------------------------------
    def evaluate(self, module: HloModule, args: Sequence[Any]) -> Any:
        """Evaluate the module's entry computation on `args` (one value per entry parameter)."""
        self.module = module
        comp = module.entry
        if comp is None:
            raise InterpreterError(f"module {module.name} has no entry computation")
        params = comp.parameters
        if len(args) != len(params):
            raise InterpreterError(
                f"module {module.name} takes {len(params)} argument(s), {len(args)} given")
        values = [_coerce_argument(p, a) for p, a in zip(params, args)]
        return self.call(comp, values)

    def restart(self) -> None:
        """Make the next `evaluate` an independent run, as on a fresh evaluator (the generators
        start over, collectives count from zero), keeping the evaluation plans (and the invariant
        values they cached): a caller running one module many times (a benchmark, hlo-run's
        `--iterations`) works each computation's plan out once instead of once per run."""
        self._rng = None
        self.rng_state = self._first_rng_state
        self.collective_seq = {}

    def call(self, computation: HloComputation, args: Sequence[Any]) -> Any:
        """Evaluate a (called) computation on already-evaluated argument values."""
        if self._active:
            return self._run(computation, args)
        with self._session():
            return self._run(computation, args)

    def call_owned(self, computation: HloComputation, args: list) -> Any:
        """Like `call`, but the caller hands its references over: `args` is emptied once the
        parameters are bound, so a value that nothing else refers to may be updated in place
        (a while loop's state from one iteration to the next)."""
        if self._active:
            return self._run(computation, args, owned=True)
        with self._session():
            return self._run(computation, args, owned=True)

    def call_fusion(self, fusion: HloInstruction, operands: Sequence[Any]) -> Any:
        """Evaluate a fusion instruction's fused computation on its operand values (large
        elementwise parts run chunk by chunk, as in every computation: see `regions.py`)."""
        calls = fusion.attrs["calls"]
        return self.call(calls[0] if isinstance(calls, list) else calls, operands)

    def run_elementwise(self, comp: HloComputation, args: Sequence[Any]) -> Any:
        """Evaluate an elementwise computation on arrays of any (common, broadcastable) shape.

        Shapes are not checked, and broadcast / reshape / bitcast / copy pass their operand on
        unchanged (they are only ever scalar-to-scalar or shape-preserving in such computations),
        except that a bitcast between element types reinterprets the bits.
        """
        plan = self._plan(comp)
        values = self._bind(plan, comp, args)
        if self._active:
            self._exec(plan.elementwise_steps(_elementwise_handler), values)
        else:
            with self._session():
                self._exec(plan.elementwise_steps(_elementwise_handler), values)
        return values[plan.root_slot]

    def evaluate_instruction(self, instr: HloInstruction, operands: Sequence[Any]) -> Any:
        """Evaluate one instruction on already-evaluated operand values (constant folding and
        trip-count analysis in hlo-opt); failures are InterpreterErrors naming `instr`, and the
        value is checked against the instruction's shape like every value of a walk."""
        try:
            with self._session():
                value = _handler(instr)(instr, list(operands), self)
        except Exception as exc:  # noqa: BLE001 - every failure names the instruction
            raise _named_error(instr, exc) from exc
        return _check_value(instr, instr.shape, value)

    def owns(self, value: Any) -> bool:
        """True when the running handler may write into operand `value`: the evaluator donated it
        (its last use, and no other reference to the array exists)."""
        return value is self._donated and value is not None

    def map_computation(self, comp: HloComputation, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Apply a scalar computation elementwise over same-shaped arrays.

        `comp` takes one scalar per array (a reducer, comparator, map function or scatter
        combiner); the result is one array per output of `comp` (its tuple elements, or just its
        root), each shaped like the inputs. Computations made only of elementwise ops, constants,
        parameters, tuples, get-tuple-elements and scalar broadcasts/reshapes are evaluated once
        with whole arrays as parameters; anything else falls back to one call per element.
        """
        arrays = [np.asarray(a) for a in arrays]
        shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
        with self._session():
            if self.is_vectorizable(comp):
                out = self.run_elementwise(comp, arrays)
                outs = list(out) if isinstance(out, tuple) else [out]
                return [_full(o, shape) for o in outs]
            return self._map_per_element(comp, arrays, shape)

    def is_vectorizable(self, comp: HloComputation) -> bool:
        """True when `comp` is scalar and elementwise, so it can run on whole arrays at once."""
        entry = self._vector_ok.get(id(comp))
        if entry is None or entry[0] is not comp:  # the computation is kept so its id stays unique
            self._vector_ok[id(comp)] = (comp, False)  # guards against recursion through `call`
            verdict = all(_vectorizable_instr(i, self) for i in comp.instructions)
            entry = self._vector_ok[id(comp)] = (comp, verdict)
        return entry[1]

    def cached_verdict(self, kind: str, comp: HloComputation, fn) -> Any:
        """`fn(comp, self)`, computed once per computation and kind (handlers' analyses of called
        computations, e.g. whether a reducer is associative)."""
        key = (kind, id(comp))
        entry = self._verdicts.get(key)
        if entry is None or entry[0] is not comp:  # the computation is kept so its id stays unique
            entry = self._verdicts[key] = (comp, fn(comp, self))
        return entry[1]

    def rng(self) -> np.random.Generator:
        """The deterministic generator behind `rng` (seeded once per evaluator)."""
        if self._rng is None:
            self._rng = np.random.Generator(np.random.PCG64(self.rng_seed))
        return self._rng

    # -- the walk ---------------------------------------------------------------------------------
    def session(self) -> contextlib.AbstractContextManager:
        """What every evaluation runs under, for a caller that evaluates many instructions one by
        one (`evaluate_instruction`): entered once around them, the float error state and the BLAS
        thread count are set once, where each call would set them (2-40 us when OpenBLAS has more
        than one thread)."""
        return self._session()

    @contextlib.contextmanager
    def _session(self) -> Iterator[None]:
        """What every evaluation runs under (entered once, by the outermost entry point): float
        exceptions ignored (IEEE results, wrapping integers) and one BLAS thread."""
        if self._active:
            yield
            return
        self._active = True
        try:
            with np.errstate(all="ignore"), blas.single_threaded():
                yield
        finally:
            self._active = False

    def _plan(self, comp: HloComputation) -> Plan:
        plan = self._plans.get(id(comp))
        if plan is None or plan.is_stale(comp):
            plan = self._plans[id(comp)] = Plan(comp, _plan_handler, self.fold_converts)
        return plan

    def _bind(self, plan: Plan, comp: HloComputation, args: Sequence[Any]) -> list:
        """A fresh value list with the parameters bound."""
        values: list[Any] = [None] * plan.slots
        try:
            for number, slot in plan.param_slots:
                values[slot] = args[number]
        except IndexError:
            number = max(n for n, _ in plan.param_slots)
            raise InterpreterError(f"computation {comp.name} reads parameter {number} but got "
                                   f"{len(args)} argument(s)") from None
        return values

    def _run(self, comp: HloComputation, args: Sequence[Any], owned: bool = False) -> Any:
        plan = self._plans.get(id(comp))
        if plan is None or plan.computation is not comp or plan.root is not comp.root \
                or plan.size != len(comp.instructions):
            plan = self._plan(comp)
        values = self._bind(plan, comp, args)
        if owned:
            args.clear()
        if plan.cache is None:
            self._exec(plan.invariant_steps, values)
            plan.runs += 1
            if plan.runs >= 2:  # called again: keep the invariant values the other steps read
                plan.cache = [values[s] for s in plan.invariant_slots]
        else:
            for slot, value in zip(plan.invariant_slots, plan.cache):
                values[slot] = value
        self._exec(plan.variant_steps, values)
        return values[plan.root_slot]

    def _exec(self, steps: list[tuple], values: list) -> None:
        """Run plan steps over `values` (the interpreter's innermost loop)."""
        instr = None
        try:
            for handler, instr, fetch, out, frees, check, dtype, dims, donate in steps:
                operands = fetch(values)
                if donate >= 0:
                    values[donate] = None
                    outer, self._donated = self._donated, operands[0] if _exclusive(operands[0]) else None
                    try:
                        value = handler(instr, operands, self)
                    finally:
                        self._donated = outer
                else:
                    value = handler(instr, operands, self)
                if check:
                    if check != ARRAY_CHECK or not (type(value) is np.ndarray and value.dtype is dtype
                                                    and value.shape == dims):
                        value = _check_value(instr, instr.shape, value)
                values[out] = value
                for s in frees:
                    values[s] = None
        except InterpreterError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure inside a handler names the instruction
            raise _named_error(instr, exc) from exc

    def _map_per_element(self, comp: HloComputation, arrays: list[np.ndarray], shape) -> list[np.ndarray]:
        root_shape = comp.root.shape
        leaf_shapes = list(root_shape.tuple_shapes) if root_shape.is_tuple else [root_shape]
        outs = [np.empty(shape, dtype=s.element_type.np_dtype) for s in leaf_shapes]
        full = [np.broadcast_to(a, shape) for a in arrays]
        for idx in np.ndindex(*shape):
            res = self._run(comp, [np.asarray(a[idx]) for a in full])
            res = res if isinstance(res, tuple) else (res,)
            for o, r in zip(outs, res):
                o[idx] = r
        return outs


def _missing_handler(instr: HloInstruction, operands, ev) -> Any:
    raise InterpreterError(f"{_where(instr)}: the interpreter cannot evaluate opcode '{instr.opcode}'")


def _handler(instr: HloInstruction) -> Callable:
    """The registered handler for the instruction's opcode (one that raises when there is none)."""
    return HANDLERS.get(instr.opcode, _missing_handler)


def _plan_handler(instr: HloInstruction) -> Callable:
    """What a plan step calls: a handler specialized to the instruction's types, else the registered one."""
    return fast.specialize(instr) or _handler(instr)


def _elementwise_handler(instr: HloInstruction) -> Callable:
    return _ELEMENTWISE_MODE.get(instr.opcode) or _handler(instr)


def _named_error(instr: HloInstruction | None, exc: Exception) -> InterpreterError:
    if isinstance(exc, InterpreterError):
        return exc
    where = _where(instr) if instr is not None else "evaluator"
    error = InterpreterError(f"{where}: {exc}" if isinstance(exc, HloError) else
                             f"{where}: {type(exc).__name__}: {exc}")
    if instr is not None and instr.parent is not None:
        error.computation = instr.parent.name
    return error


def _exclusive(value: Any) -> bool:
    """True when `value` is an array owning its memory that only the caller's operand container
    refers to (so writing into it cannot be seen by any other value)."""
    return (type(value) is np.ndarray and value.base is None and value.flags.writeable
            and sys.getrefcount(value) <= 3)


def _vectorizable_instr(instr: HloInstruction, ev: Evaluator) -> bool:
    shape = instr.shape
    leaves = [s for _, s in shape.leaf_shapes()]
    if any(s.is_array and s.rank != 0 for s in leaves):
        return False
    op = instr.opcode
    if op == "call":
        return ev.is_vectorizable(instr.attrs["to_apply"])
    if op in ("rng", "rng-bit-generator", "rng-get-and-update-state"):
        return False
    from hlo_common.hlo.opcodes import is_elementwise

    return is_elementwise(op) or op in _VECTORIZABLE_EXTRA


def _full(value: np.ndarray, shape) -> np.ndarray:
    value = np.asarray(value)
    if value.shape == tuple(shape):
        return value
    return np.array(np.broadcast_to(value, shape))


def _where(instr: HloInstruction) -> str:
    comp = instr.parent.name if instr.parent is not None else "?"
    return f"%{instr.name} ({instr.opcode}) in computation {comp}"


def _check_value(instr: HloInstruction, shape: Shape, value: Any) -> Any:
    """The handler's result, checked against (and scalars normalized to) the instruction's shape."""
    if shape.is_tuple:
        if not isinstance(value, tuple) or len(value) != len(shape.tuple_shapes):
            raise InterpreterError(f"{_where(instr)}: handler returned {type(value).__name__} for {shape}")
        return tuple(_check_value(instr, s, v) for s, v in zip(shape.tuple_shapes, value))
    if not shape.is_array:
        return value if value is not None else TOKEN
    if not isinstance(value, np.ndarray):
        value = np.asarray(value)
    want = shape.element_type.np_dtype
    if value.dtype != want or value.shape != shape.dims:
        raise InterpreterError(
            f"{_where(instr)}: handler returned {value.dtype}{list(value.shape)}, expected {shape}")
    return value


def _coerce_argument(param: HloInstruction, arg: Any) -> Any:
    """An entry argument checked against its parameter's shape (lists and scalars are converted)."""
    return _coerce(param, param.shape, arg)


def _coerce(param: HloInstruction, shape: Shape, arg: Any) -> Any:
    if shape.is_tuple:
        if not isinstance(arg, (tuple, list)) or len(arg) != len(shape.tuple_shapes):
            raise InterpreterError(
                f"parameter {param.parameter_number} (%{param.name}) expects a tuple {shape}")
        return tuple(_coerce(param, s, a) for s, a in zip(shape.tuple_shapes, arg))
    if not shape.is_array:
        return TOKEN
    want = shape.element_type.np_dtype
    if not isinstance(arg, np.ndarray):
        try:
            arg = np.asarray(arg, dtype=want)
        except (TypeError, ValueError) as exc:
            raise InterpreterError(f"parameter {param.parameter_number} (%{param.name}): {exc}") from None
    if arg.dtype != want or arg.shape != shape.dims:
        raise InterpreterError(
            f"parameter {param.parameter_number} (%{param.name}) expects {shape}, "
            f"got {arg.dtype}{list(arg.shape)}")
    return arg


def evaluate(module: HloModule, args: Sequence[Any], **options: Any) -> Any:
    """Evaluate `module` on `args` with a fresh `Evaluator` (options go to its constructor)."""
    return Evaluator(**options).evaluate(module, args)
