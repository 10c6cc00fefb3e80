"""The interpreter platform: `hlo_common`'s reference evaluator behind the backend interface.

`load` only checks that the program holds an HLO module; each `run` evaluates it as an
independent run (the rng state starts over every time) on one `Evaluator` per executable,
restarted (`Evaluator.restart`), so that `--iterations` works each computation's evaluation plan
out once, as XLA compiles once, not once per run. Plans belong to the module's computations, so
the module must not be edited between two runs of one executable: hlo-run loads an executable
and runs it (`cli._run_on`, `_check_against_reference`) with no pass in between. A program on several
devices runs one evaluator per device (`hlo_common.interpreter.devices`); its arguments and
results carry a leading device axis (`hlo_run.devices`).
"""

from __future__ import annotations

from typing import Any, Sequence

from hlo_run.backends import Backend, BackendUnavailable, Executable, Program


class InterpreterExecutable(Executable):
    collective_timeout = 60.0  # seconds a collective waits for the rest of its group

    def __init__(self, program: Program):
        self.program = program
        self._evaluator = None  # made on the first single-device run, for its while limit

    def run(self, args: Sequence[Any]) -> Any:
        from hlo_common.interpreter.evaluator import Evaluator

        program = self.program
        if program.devices > 1:
            from hlo_common.interpreter.devices import run_devices
            from hlo_run.devices import per_device_args, stack

            results = run_devices(program.module, per_device_args(args, program.devices), program.replicas,
                                  program.partitions, timeout=self.collective_timeout,
                                  max_while_iterations=self.max_while_iterations)
            return stack(results)
        evaluator = self._evaluator
        if evaluator is None or evaluator.max_while_iterations != self.max_while_iterations:
            evaluator = self._evaluator = Evaluator(max_while_iterations=self.max_while_iterations)
        else:
            evaluator.restart()
        return evaluator.evaluate(self.program.module, list(args))


class InterpreterBackend(Backend):
    name = "interpreter"

    def load(self, program: Program) -> Executable:
        if program.module is None:
            raise BackendUnavailable(f"{program.name}: the interpreter needs an HLO module")
        return InterpreterExecutable(program)
