"""The interpreter platform: `hlo_common`'s reference evaluator behind the backend interface.

`load` only checks that the program holds an HLO module; each `run` evaluates it with a fresh
`Evaluator`, so runs are independent (the rng state starts over every time).
"""

from __future__ import annotations

from typing import Any, Sequence

from hlo_run.backends import Backend, BackendUnavailable, Executable, Program


class InterpreterExecutable(Executable):
    def __init__(self, program: Program):
        self.program = program

    def run(self, args: Sequence[Any]) -> Any:
        from hlo_common.interpreter.evaluator import Evaluator

        evaluator = Evaluator(max_while_iterations=self.max_while_iterations)
        return evaluator.evaluate(self.program.module, list(args))


class InterpreterBackend(Backend):
    name = "interpreter"

    def load(self, program: Program) -> Executable:
        if program.module is None:
            raise BackendUnavailable(f"{program.name}: the interpreter needs an HLO module")
        return InterpreterExecutable(program)
