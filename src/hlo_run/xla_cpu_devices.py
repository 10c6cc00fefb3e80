"""XLA:CPU on several host devices: the reference for multi-device modules (`hlo_run.xla_cpu`
runs one device).

XLA:CPU makes N host devices when its client is created under
`XLA_FLAGS=--xla_force_host_platform_device_count=N`. When this process has not created the jax
CPU client yet, the flag is set here (at least 8 devices) and the module runs in process; when a
client with too few devices exists already, the run happens in a child Python process
(`python -m hlo_run.xla_cpu_devices`), which creates its own.

The module is compiled once for `replicas` x `partitions` devices, device d being replica
d // partitions and partition d % partitions (the device assignment says so explicitly), and run
with each device's own arguments: every argument is handed over as one jax array whose shards
(one per device, each of the parameter's shape) hold the per-device values.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from typing import Any, Sequence

import numpy as np

from hlo_run.xla_cpu import XlaCpuRejected, _first_line, _jax_modules, _rebuild

_FLAG = "--xla_force_host_platform_device_count"
MIN_DEVICES = 8


def _client_exists() -> bool:
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge

    return bool(getattr(xla_bridge, "_backends", None))


def _ensure_flag(n: int) -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if _FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {_FLAG}={max(n, MIN_DEVICES)}".strip()


def for_xla(text: str, partitions_as_replicas: int | None) -> str:
    """The module rewritten where jaxlib's path into XLA:CPU loses or refuses something.

    - Mesh replica groups that name their device order (`device_ids=(...)`) become the explicit
      lists they stand for: the HLO-to-StableHLO conversion keeps the mesh's axes but drops its
      device ids (jaxlib 0.10), which would regroup the devices.
    - With `partitions_as_replicas` P: XLA:CPU compiles num_partitions > 1 only through its SPMD
      partitioner, which refuses programs that are already partitioned (their cross-partition
      all-reduces, partition-id). With one partition, replica r plays partition r: partition-id
      becomes replica-id, the collectives of the cross-partition mode lose their channel_id
      (cross-replica: the same ids, now replicas), flattened ids stay the same ids, shardings go,
      and a bitcast that only reshapes (row-major layouts, one element type) becomes a reshape,
      which XLA's layout assignment accepts again.
    """
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module
    from hlo_common.hlo.replica_groups import ReplicaGroups, group_mode
    from hlo_common.interpreter.devices import COLLECTIVES

    module = parse_module(text)
    for comp in module.computations:
        for instr in comp.instructions:
            groups = instr.attrs.get("replica_groups")
            if isinstance(groups, ReplicaGroups) and groups.mesh is not None and groups.mesh.device_ids:
                instr.attrs["replica_groups"] = ReplicaGroups(explicit=tuple(map(tuple, groups.groups())))
            if partitions_as_replicas is None:
                continue
            instr.sharding = None
            if instr.opcode == "partition-id":
                instr.opcode = "replica-id"
            elif instr.opcode in COLLECTIVES and group_mode(instr) == "cross-partition":
                instr.attrs.pop("channel_id", None)
            elif instr.opcode == "bitcast" and _plain_reshape(instr):
                instr.opcode = "reshape"
    if partitions_as_replicas is not None:
        module.set_header_attr("num_partitions", None)
        module.set_header_attr("replica_count", str(partitions_as_replicas))
    return print_module(module)


def _plain_reshape(instr) -> bool:
    a, b = instr.operands[0].shape, instr.shape
    row_major = all(s.layout is None or s.layout.is_default() for s in (a, b))
    return a.is_array and b.is_array and a.element_type == b.element_type and row_major


def run_on_devices(text: str, args: Sequence[Sequence[Any]], replicas: int, partitions: int,
                   *, allow_excess_precision: bool = True) -> list[Any]:
    """Each device's result (arrays, tuples nested as the entry's result) of `text` on XLA:CPU."""
    n = replicas * partitions
    if replicas == 1 and partitions > 1:
        text, replicas, partitions = for_xla(text, partitions), partitions, 1
    elif "device_ids=(" in text:
        text = for_xla(text, None)
    if not _client_exists():
        _ensure_flag(n)
    jax, _, _ = _jax_modules()
    if len(jax.extend.backend.get_backend("cpu").local_devices()) >= n:
        return _run_here(text, args, replicas, partitions, allow_excess_precision)
    return _run_in_child(text, args, replicas, partitions, allow_excess_precision)


def _compile(text: str, replicas: int, partitions: int, allow_excess_precision: bool):
    jax, _jax, xc = _jax_modules()
    try:
        proto = xc.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
        program_shape = xc.hlo.XlaComputation(proto).program_shape()
    except Exception as exc:  # noqa: BLE001 - XLA raises its own runtime error types
        raise XlaCpuRejected(f"XLA's parser rejects the module: {_first_line(exc)}") from None
    for i, shape in enumerate(program_shape.parameter_shapes()):
        if shape.is_tuple() or shape.is_token():
            raise XlaCpuRejected(f"XLA:CPU cannot take the tuple- or token-shaped entry parameter {i}")
    backend = jax.extend.backend.get_backend("cpu")
    devices = backend.local_devices()[:replicas * partitions]
    options = xc.CompileOptions()
    build = options.executable_build_options
    build.num_replicas, build.num_partitions = replicas, partitions
    build.use_spmd_partitioning = partitions > 1  # XLA:CPU's condition for num_partitions > 1
    build.device_assignment = xc.DeviceAssignment.create(
        np.array([d.id for d in devices]).reshape(replicas, partitions))
    if not allow_excess_precision:
        options.env_option_overrides = [("xla_allow_excess_precision", False)]
    try:
        mlir = _jax.mlir.hlo_to_stablehlo(proto)
        loaded = backend.compile_and_load(mlir, _jax.DeviceList(tuple(devices)), options)
    except Exception as exc:  # noqa: BLE001
        raise XlaCpuRejected(f"XLA:CPU cannot compile the module: {_first_line(exc)}") from None
    return loaded, devices, program_shape


def _run_here(text, args, replicas, partitions, allow_excess_precision) -> list[Any]:
    jax, _, _ = _jax_modules()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    loaded, devices, program_shape = _compile(text, replicas, partitions, allow_excess_precision)
    n = len(devices)
    # A "replicated" sharding whose shards nonetheless hold different values: one per device.
    sharding = NamedSharding(Mesh(np.array(devices), ("d",)), PartitionSpec())
    try:
        with jax.enable_x64(True):
            arrays = []
            for k in range(len(program_shape.parameter_shapes())):
                shards = [jax.device_put(np.asarray(args[d][k]), devices[d]) for d in range(n)]
                arrays.append(jax.make_array_from_single_device_arrays(shards[0].shape, sharding, shards))
            result = loaded.execute_sharded(arrays)
            leaves = [[np.asarray(x) for x in out] for out in result.disassemble_into_single_device_arrays()]
    except Exception as exc:  # noqa: BLE001
        raise XlaCpuRejected(f"XLA:CPU failed to run the module: {_first_line(exc)}") from None
    return [_rebuild(program_shape.result_shape(), [leaf[d] for leaf in leaves])[0] for d in range(n)]


def _run_in_child(text, args, replicas, partitions, allow_excess_precision) -> list[Any]:
    with tempfile.TemporaryDirectory(prefix="hlo_run_xla_cpu_") as tmp:
        request, answer = os.path.join(tmp, "in.pkl"), os.path.join(tmp, "out.pkl")
        with open(request, "wb") as f:
            pickle.dump((text, [list(a) for a in args], replicas, partitions, allow_excess_precision), f)
        env = dict(os.environ)
        env["XLA_FLAGS"] = " ".join(x for x in env.get("XLA_FLAGS", "").split() if not x.startswith(_FLAG))
        env["XLA_FLAGS"] += f" {_FLAG}={max(replicas * partitions, MIN_DEVICES)}"
        proc = subprocess.run([sys.executable, "-m", "hlo_run.xla_cpu_devices", request, answer],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.exists(answer):
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            raise XlaCpuRejected(lines[-1] if lines else f"XLA:CPU child exited with {proc.returncode}")
        with open(answer, "rb") as f:
            status, payload = pickle.load(f)
    if status != "ok":
        raise XlaCpuRejected(payload)
    return payload


def _child(request: str, answer: str) -> None:
    with open(request, "rb") as f:
        text, args, replicas, partitions, excess = pickle.load(f)
    try:
        out = ("ok", _run_here(text, args, replicas, partitions, excess))
    except XlaCpuRejected as exc:
        out = ("error", exc.one_line())
    with open(answer, "wb") as f:
        pickle.dump(out, f)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
