"""Device descriptions for `hlo-opt --device NAME|FILE` and `hlo-codegen --arch sm_XY` (XLA's
`se::DeviceDescription`, read from `xla/backends/gpu/target_config/specs/*.txtpb`); the GPU cost
model, the fusion analysis and the emitters read them.

    >>> load_device("h100").core_count
    132

Built-in names: `h100` (H100 SXM, the default), `h200`, `a100`. A JSON file holds one object with
the same field names (`gpu_device_info` spelling); `name` is required, any other field not given
takes the H100 value. Unknown fields and non-positive numbers are errors naming the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from hlo_common.errors import InputError


@dataclass(frozen=True)
class DeviceDescription:
    name: str
    core_count: int  # streaming multiprocessors
    clock_rate_ghz: float
    memory_bandwidth: float  # bytes / second
    l2_cache_size: int  # bytes
    device_memory_size: int  # bytes
    threads_per_block_limit: int = 1024
    threads_per_warp: int = 32
    threads_per_core_limit: int = 2048
    fpus_per_core: int = 128
    shared_memory_per_block: int = 49152
    shared_memory_per_block_optin: int = 232448
    shared_memory_per_core: int = 233472
    registers_per_core_limit: int = 65536
    registers_per_block_limit: int = 65536
    compute_capability_major: int = 9
    compute_capability_minor: int = 0
    # Constants of XLA's se::DeviceDescription the GPU performance model reads (not in the specs).
    l1_cache_size_per_SM: int = 2 * 1024
    dram_to_l2_transaction_size_bytes: int = 64
    memory_transactions_per_clock: int = 32
    block_dim_limit: tuple = (2147483647, 65535, 65535)  # grid limits x, y, z

    @property
    def compute_capability(self) -> tuple[int, int]:
        return (self.compute_capability_major, self.compute_capability_minor)

    @property
    def arch(self) -> str:
        """The PTX target, e.g. `sm_90`."""
        return f"sm_{self.compute_capability_major}{self.compute_capability_minor}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


H100 = DeviceDescription("NVIDIA H100 80GB HBM3", core_count=132, clock_rate_ghz=1.98,
                         memory_bandwidth=3.352e12, l2_cache_size=52428800,
                         device_memory_size=84942979072)
H200 = replace(H100, name="NVIDIA H200", memory_bandwidth=4.8e12, device_memory_size=151397597184)
A100 = replace(H100, name="NVIDIA A100-SXM4-80GB", core_count=108, clock_rate_ghz=1.41,
               memory_bandwidth=2.039e12, l2_cache_size=41943040, device_memory_size=85899345920,
               fpus_per_core=64, shared_memory_per_block_optin=166912, shared_memory_per_core=167936,
               compute_capability_major=8)
BUILTIN_DEVICES = {"h100": H100, "h200": H200, "a100": A100}
_ARCH = re.compile(r"sm_(\d+)(\d)[a-z]?")


def device_for_arch(arch: str) -> DeviceDescription:
    """The device an `sm_XY` target stands for (`hlo-codegen --arch`): the first built-in device of
    that compute capability (sm_90, sm_90a: H100; sm_80: A100). Other architectures have no
    description here and keep the default, the H100, as hlo-opt does without `--device`."""
    m = _ARCH.fullmatch(arch)
    if m is not None:
        capability = (int(m.group(1)), int(m.group(2)))
        for device in BUILTIN_DEVICES.values():
            if device.compute_capability == capability:
                return device
    return H100


MAX_DEVICE_FILE_BYTES = 1 << 20


def _read_capped(spec: str) -> bytes:
    """At most MAX_DEVICE_FILE_BYTES of the file: /dev/zero or an endless pipe is an error, not a
    hang until memory runs out (the layer below `hlo_common.source`, so read here)."""
    try:
        with open(spec, "rb") as f:
            data = f.read(MAX_DEVICE_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read device file '{spec}': {exc.strerror or exc}") from None
    if len(data) > MAX_DEVICE_FILE_BYTES:
        raise InputError(f"cannot read '{spec}': more than {MAX_DEVICE_FILE_BYTES} bytes, the most read "
                         "from one input (a device or a pipe that does not end?)")
    return data


def load_device(spec: str) -> DeviceDescription:
    """A built-in name (any case) or the path of a JSON file; errors are InputErrors."""
    if spec.lower() in BUILTIN_DEVICES:
        return BUILTIN_DEVICES[spec.lower()]
    path = Path(spec)
    if not path.exists():
        raise InputError(f"unknown device '{spec}': expected one of {', '.join(BUILTIN_DEVICES)} "
                         "or a JSON file")
    raw = _read_capped(spec)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read device file '{spec}': {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{spec}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{spec}: JSON nested too deeply for a device description") from None
    return device_from_dict(data, spec)


def device_from_dict(data: object, source: str = "<device>") -> DeviceDescription:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a device description must be a JSON object")
    known = {f.name: f for f in fields(DeviceDescription)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise InputError(f"{source}: unknown device field '{unknown[0]}' "
                         f"(known: {', '.join(sorted(known))})")
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise InputError(f"{source}: device field 'name' must be a non-empty string")
    values = {}
    for key, value in data.items():
        if key == "name":
            continue
        if key == "block_dim_limit":
            if not (isinstance(value, list) and len(value) == 3
                    and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
                raise InputError(f"{source}: device field 'block_dim_limit' must be a list of 3 positive "
                                 f"integers, got {value!r}")
            values[key] = tuple(value)
            continue
        want_int = known[key].type in ("int", int)
        ok = isinstance(value, int) if want_int else isinstance(value, (int, float))
        ok = ok and not isinstance(value, bool)
        ok = ok and (value >= 0 if key.startswith("compute_capability") else value > 0)
        if not ok:
            kind = "a positive integer" if want_int else "a positive number"
            raise InputError(f"{source}: device field '{key}' must be {kind}, got {value!r}")
        values[key] = value
    return replace(H100, name=data["name"], **values)
