"""Several devices in one process: the reference interpreter's rendezvous for collectives.

A module with `replica_count` R and `num_partitions` P runs on N = R*P devices, device d being
replica d // P and partition d % P (XLA's flattened id, xla/service/collective_ops_utils.cc).
`run_devices` evaluates the module once per device, each on its own thread with its own
`Evaluator`; a collective handler (`collectives.py`) hands its operand to `World.exchange`, which
blocks until every member of its group has arrived and gives each one the members' values in
group order, from which it computes its result with numpy. Results are deterministic: they depend
only on the values and the group order, never on thread timing. A device that fails stops the
others (they raise at their next or current collective), and a collective waits at most
`timeout` seconds.

Who takes part follows XLA's CollectiveOpGroupMode (GetCollectiveOpGroupMode and
GetParticipatingDevices in xla/service/collective_ops_utils.cc): without `channel_id` the groups
hold replica ids (cross-replica, within one partition); with `channel_id`, all-reduce, all-gather
and reduce-scatter group replicas across all partitions (cross-replica-and-partition) or, with
`use_global_device_ids=true`, flattened device ids; the other collectives group partition ids
(cross-partition, within one replica). Empty groups mean all replicas (or partitions).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from hlo_common.errors import HloError, InterpreterError
from hlo_common.hlo.replica_groups import check_groups, group_mode

COLLECTIVES = frozenset({"all-reduce", "all-reduce-start", "all-gather", "all-gather-start",
                         "reduce-scatter", "all-to-all", "collective-broadcast", "collective-permute",
                         "collective-permute-start", "ragged-all-to-all"})


class Aborted(InterpreterError):
    """Another device failed, so this one stops at its collective."""


def _raw_groups(instr) -> list[list[int]]:
    raw = instr.attrs.get("replica_groups")
    return [list(g) for g in raw.groups()] if raw is not None and hasattr(raw, "groups") else []


class World:
    """The devices of one run: their counts and the rendezvous where collectives meet."""

    def __init__(self, replicas: int, partitions: int, timeout: float = 60.0):
        self.replicas, self.partitions = replicas, partitions
        self.n = replicas * partitions
        self.timeout = timeout
        self._cond = threading.Condition()
        self._slots: dict[tuple, dict[int, Any]] = {}
        self._reads: dict[tuple, int] = {}
        self._failed: str | None = None
        self._done: set[int] = set()

    def device(self, replica: int, partition: int) -> int:
        return replica * self.partitions + partition

    def participants(self, instr, me: int) -> list[int]:
        """The devices of `me`'s group for `instr`, in group order (`me` is one of them)."""
        r, p = divmod(me, self.partitions)
        mode, groups = group_mode(instr), _raw_groups(instr)
        if mode == "flattened-id":
            return _find(groups or [list(range(self.n))], me)
        if mode == "cross-partition":
            return [self.device(r, q) for q in _find(groups or [list(range(self.partitions))], p)]
        mine = _find(groups or [list(range(self.replicas))], r)
        if mode == "cross-replica":
            return [self.device(q, p) for q in mine]
        return [self.device(q, x) for q in mine for x in range(self.partitions)]

    def domain(self, instr, me: int) -> tuple[list[int], int]:
        """collective-permute's devices: (the devices its pairs' ids name, in id order; me's id)."""
        r, p = divmod(me, self.partitions)
        if instr.attrs.get("channel_id") is None:
            return [self.device(q, p) for q in range(self.replicas)], r
        return [self.device(r, q) for q in range(self.partitions)], p

    def check(self, instr) -> None:
        """HloError unless `instr`'s groups fit this world (hlo.replica_groups.check_groups)."""
        try:
            check_groups(instr, self.replicas, self.partitions)
        except ValueError as exc:
            raise HloError(f"%{instr.name} ({instr.opcode}, {group_mode(instr)}): {exc}") from None

    def exchange(self, instr, seq: int, me: int, group: Sequence[int], value: Any) -> list[Any]:
        """Every group member's value, in group order, once all of them have called this."""
        key = (id(instr), seq, tuple(group))
        with self._cond:
            slot = self._slots.setdefault(key, {})
            slot[me] = value
            if len(slot) == len(group):
                self._cond.notify_all()
            ok = self._cond.wait_for(lambda: len(slot) == len(group) or self._failed is not None
                                     or not self._done.isdisjoint(set(group) - set(slot)), self.timeout)
            if len(slot) != len(group):
                raise self._stuck(instr, group, slot, ok)
            values = [slot[d] for d in group]
            self._reads[key] = self._reads.get(key, 0) + 1
            if self._reads[key] == len(group):
                del self._slots[key], self._reads[key]
            return values

    def _stuck(self, instr, group, slot, ok: bool) -> InterpreterError:
        if self._failed is not None:
            return Aborted(f"stopped: {self._failed}")
        missing = [d for d in group if d not in slot]
        why = "finished without reaching it" if ok else f"did not reach it within {self.timeout:g} s"
        return InterpreterError(f"%{instr.name} ({instr.opcode}): device(s) {missing} of group "
                                f"{list(group)} {why}")

    def fail(self, device: int, message: str) -> None:
        with self._cond:
            if self._failed is None:
                self._failed = f"device {device} failed: {message}"
            self._cond.notify_all()

    def finished(self, device: int) -> None:
        with self._cond:
            self._done.add(device)
            self._cond.notify_all()


def _find(groups: list[list[int]], me: int) -> list[int]:
    for g in groups:
        if me in g:
            return g
    return [me]  # not in any group: alone (the verifier refuses such groups where counts are known)


def module_collectives(module) -> list:
    return [i for c in module.computations for i in c.instructions if i.opcode in COLLECTIVES]


def _evaluators(world: World, partitions: int, options: dict) -> list:
    """One evaluator per device, each drawing its own `rng` stream (seed + device), as devices do."""
    from hlo_common.interpreter.evaluator import Evaluator

    seed = options.pop("rng_seed", 0x5EED)
    evaluators = [Evaluator(replica_id=d // partitions, partition_id=d % partitions, rng_seed=seed + d,
                            **options) for d in range(world.n)]
    for d, ev in enumerate(evaluators):
        ev.world, ev.device = world, d
    return evaluators


def run_devices(module, args_per_device: Sequence[Sequence[Any]], replicas: int, partitions: int,
                *, timeout: float = 60.0, **options: Any) -> list[Any]:
    """Evaluate `module` on every device (args_per_device[d] for device d); the results by device.
    The first failing device's error is raised, naming the device."""
    world = World(replicas, partitions, timeout)
    for instr in module_collectives(module):
        world.check(instr)
    n = world.n
    results: list[Any] = [None] * n
    errors: list[tuple[int, BaseException] | None] = [None] * n
    evaluators = _evaluators(world, partitions, options)

    def body(d: int) -> None:
        try:
            results[d] = evaluators[d].evaluate(module, list(args_per_device[d]))
        except BaseException as exc:  # noqa: BLE001 - reported below, after every thread ended
            errors[d] = (d, exc)
            world.fail(d, exc.one_line() if isinstance(exc, HloError) else str(exc))
        finally:
            world.finished(d)

    if n == 1:
        body(0)
    else:
        # daemon threads: a run interrupted in the main thread (Ctrl-C, a test's time limit)
        # stops the others at their next collective and never keeps the process alive
        threads = [threading.Thread(target=body, args=(d,), name=f"device-{d}", daemon=True)
                   for d in range(n)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException:
            world.fail(-1, "the run was interrupted")
            raise
    first = next((e for e in errors if e is not None and not isinstance(e[1], Aborted)),
                 next((e for e in errors if e is not None), None))
    if first is not None:
        d, exc = first
        if isinstance(exc, HloError) and n > 1:
            raise InterpreterError(f"device {d} (replica {d // partitions}, partition "
                                   f"{d % partitions}): {exc.one_line()}") from exc
        raise exc
    return results
