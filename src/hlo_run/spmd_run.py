"""Running a sharded program over global arrays (issue 17 item 4): `hlo-run pre.hlo
--num-partitions N` on the HLO jax lowers (`sharding=` annotations, no collectives).

Where it sits: `hlo_run.cli.run_program` asks `prepare` first. For a global program on N > 1
devices it has hlo-opt partition the module (`--passes sdy-round-trip-import,
sharding-propagation,spmd-partitioning,dce --num-partitions N`, a subprocess like every hlo-opt
run of hlo-run's, `hlo_run.compile_hook`) and turns the program into the per-device one, which
then runs as any multi-device program does (interpreter or host over MPI). The arguments stay
global, as jax's: `--inputs` holds each parameter's full shape and random ones are made for the
full shapes; `split` hands each device its tile by the parameter's sharding, `gather` puts each
result back together by the root's sharding (`hlo_common.hlo.sharded_arrays`), checking that
the replicas of a tile agree. The reference runs the global program as it was given, on one
device, or, for a program with shard_map regions (their bodies' collectives need the N devices),
the partitioned program on the N devices. A sharded module whose device count nobody gave is a one-line error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hlo_common.errors import InputError
from hlo_common.hlo.sharded_arrays import REGION_ENTRIES, gather, is_global_program, sharding_devices, split
from hlo_run.backends import Program
from hlo_run.devices import stack, unstack

SPMD_PASSES = "sdy-round-trip-import,sharding-propagation,spmd-partitioning,dce"


@dataclass
class GlobalProgram:
    """The global program as given (`original`) and what split/gather need from it."""

    original: Program
    n: int
    param_shardings: list
    root_sharding: Any
    regions: bool = False  # holds shard_map regions, whose bodies need the N devices

    def finish(self, result: Any, partitioned: Program, args: list[Any], options, check) -> tuple:
        """(global result, program the caller compares, whether the reference ran here). A
        program with shard_map regions cannot run on one device, so its reference runs the
        partitioned program on the N devices (`check` is hlo_run.cli's comparison)."""
        checked = False
        if self.regions and options.reference != "none":
            check(partitioned, options, self.split(args), result)
            checked = True
        return self.gather(result, partitioned.name), self.original, checked

    def split(self, args: list[Any]) -> list[Any]:
        """Global arguments -> per-device arguments stacked along a leading device axis."""
        return [stack(self._pieces(arg, sharding)) for arg, sharding in zip(args, self.param_shardings)]

    def _pieces(self, value: Any, sharding) -> list[Any]:
        if not isinstance(value, tuple):
            return split(value, sharding, self.n)
        shardings = list(sharding.elements) if sharding is not None and sharding.kind == "tuple" \
            else [sharding] * len(value)
        parts = [self._pieces(v, s) for v, s in zip(value, shardings)]
        return [tuple(p[d] for p in parts) for d in range(self.n)]

    def gather(self, result: Any, name: str) -> Any:
        per_device = unstack(result, self.n)
        shape = self.original.result_shape
        if isinstance(per_device[0], tuple):
            shardings = list(self.root_sharding.elements) if self.root_sharding is not None and \
                self.root_sharding.kind == "tuple" else [self.root_sharding] * len(per_device[0])
            return tuple(self._one([d[k] for d in per_device], s, shape.tuple_shapes[k], f"{name} result {k}")
                         for k, s in enumerate(shardings))
        return self._one(per_device, self.root_sharding, shape, f"{name} result")

    @staticmethod
    def _one(pieces, sharding, shape, what: str):
        """The global result (uneven tiles' padding cut off at the global shape)."""
        array, disagree = gather(pieces, sharding, shape.dims)
        if disagree:
            raise InputError(f"{what}: devices {disagree} hold a different copy of a replicated tile")
        return array


def prepare(program: Program) -> GlobalProgram | None:
    """For a global sharded program on N > 1 devices: partition it in place (program becomes the
    per-device program) and return what running it on global arrays needs; None otherwise."""
    module = program.module
    if module is None or program.replicas != 1 or not is_global_program(module):
        return None
    needed = sharding_devices(module)
    if program.partitions == 1:
        if needed is not None and needed > 1:
            raise InputError(f"module {module.name} is sharded over {needed} devices but gives no "
                             "num_partitions: run it with --num-partitions N (jax passes the device "
                             "count in its compile options, not in the HLO)")
        return None
    from hlo_common.hlo.parser import parse_module
    from hlo_run.compile_hook import OPT_TOOL, run_tool

    n = program.partitions
    original = Program(program.name, module=module, hlo_text=program.hlo_text, dump_to=program.dump_to,
                       module_id=program.module_id, verbose=program.verbose)
    text = run_tool(OPT_TOOL, ["--passes", SPMD_PASSES, "--num-partitions", str(n)],
                    program.hlo_text.encode("utf-8"), program.name).decode("utf-8")
    partitioned = parse_module(text, f"{program.name} (partitioned by {OPT_TOOL})")
    program.module, program.hlo_text = partitioned, text
    params = sorted(partitioned.entry.parameters, key=lambda p: p.parameter_number)
    regions = any(i.opcode == "custom-call" and i.attrs.get("custom_call_target") in REGION_ENTRIES
                  for i in module.entry.instructions)
    return GlobalProgram(original, n, [p.sharding for p in params], partitioned.entry.root.sharding, regions)
