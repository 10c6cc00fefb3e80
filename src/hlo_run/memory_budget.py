"""How much memory hlo-run may still take, and the check made before each big allocation.

Where it sits: `hlo_run.inputs` (random arguments) and `hlo_run.npz_io` (`--inputs`) call
`check_fits` before they allocate a parameter's array, so a 100-billion-element parameter or an
.npz member whose header claims 373 GiB is one line naming the parameter (or the file and the
array), exit 1, instead of "internal error: MemoryError" after the process grew for minutes.

The budget is the smallest of what the machine and the process's limits leave: MemAvailable of
/proc/meminfo, the cgroup's memory limit minus its usage (v2 `memory.max`, v1
`memory.limit_in_bytes`), and RLIMIT_AS minus the address space already mapped. None (no check)
where none of them can be read. `HLO_RUN_MEMORY_LIMIT` (bytes) lowers it, for tests and shared
machines.
"""

from __future__ import annotations

import os
import resource

from hlo_common.errors import InputError

ENV_LIMIT = "HLO_RUN_MEMORY_LIMIT"


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _meminfo(key: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    for limit_path, usage_path in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and usage is not None and limit < (1 << 60):
            return max(0, limit - usage)
    return None


def _address_space_room() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    mapped = 0
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    mapped = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - mapped)


def available_bytes() -> int | None:
    """The memory hlo-run may still allocate (see the module docstring); None when unknown."""
    known = [v for v in (_meminfo("MemAvailable"), _cgroup_room(), _address_space_room()) if v is not None]
    env = os.environ.get(ENV_LIMIT, "").strip()
    if env.isdigit():
        known.append(int(env))
    return min(known) if known else None


def bytes_text(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.3g} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def check_fits(nbytes: int, what: str, budget: int | None = None, *, plural: bool = False) -> None:
    """InputError naming `what` when `nbytes` is more than the memory hlo-run may use."""
    budget = available_bytes() if budget is None else budget
    if budget is not None and nbytes > budget:
        raise InputError(f"{what} {'need' if plural else 'needs'} {bytes_text(nbytes)}, more than the "
                         f"{bytes_text(budget)} of memory available")
