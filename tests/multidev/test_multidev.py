"""Multi-device tier: jax's per-device programs (`testdata/multidev/`) on the interpreter's N
devices against XLA:CPU on N host devices, device by device (issue 16 item 6).

Each module's arguments follow hlo-run's rule with the device id in the seed; the interpreter runs
one evaluator per device (`hlo_common.interpreter.devices`), XLA:CPU runs the module compiled for
as many devices (`hlo_run.xla_cpu_devices`); every device's every result must agree within
run_hlo_module's both-bounds rule (f32 1e-4, integers exactly).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "testdata" / "multidev"
MODULES = sorted(DATA.glob("*.hlo"))
BOUND = 1e-4


def _load(path: Path):
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pipeline import verify

    text = path.read_text()
    module = parse_module(text, path.name)
    verify(module, "verification failed")
    return module, text


def test_the_tier_covers_2_3_4_6_and_8_devices_and_every_collective_kind():
    assert len(MODULES) >= 25
    counts = {int(re.search(r"_n(\d+)\.hlo$", p.name).group(1)) for p in MODULES}
    assert counts == {2, 3, 4, 6, 8}
    text = "".join(p.read_text() for p in MODULES)
    for op in ("all-reduce(", "all-gather(", "reduce-scatter(", "all-to-all(", "collective-permute(",
               "partition-id(", "replica_groups=mesh["):
        assert op in text, op


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_interpreter_matches_xla_cpu_on_every_device(path):
    pytest.importorskip("jax")
    from hlo_common.interpreter.devices import run_devices
    from hlo_run.compare import compare_arrays, flatten_leaves
    from hlo_run.devices import device_counts
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.xla_cpu import text_for_xla_cpu
    from hlo_run.xla_cpu_devices import run_on_devices

    module, text = _load(path)
    replicas, partitions = device_counts(module, None, None)
    n = replicas * partitions
    assert n == int(re.search(r"_n(\d+)$", path.stem).group(1))
    args = [make_fake_arguments(module, 0, device=d) for d in range(n)]
    assert n == 1 or not all(np.array_equal(a, b) for a, b in zip(args[0], args[1]))
    actual = run_devices(module, args, replicas, partitions)
    expected = run_on_devices(text_for_xla_cpu(module, text), args, replicas, partitions)
    for d in range(n):
        for i, (a, e) in enumerate(zip(flatten_leaves(actual[d]), flatten_leaves(expected[d]), strict=True)):
            exact = not np.issubdtype(e.dtype, np.floating)
            leaf = compare_arrays(f"out{i}", a, e, 0.0 if exact else BOUND, 0.0 if exact else BOUND)
            assert leaf.problem is None and leaf.mismatches == 0, \
                f"device {d} out{i}: {leaf.problem or leaf.mismatches} (max abs err {leaf.max_abs_error})"


def test_generator_makes_the_checked_in_files():
    pytest.importorskip("jax")
    proc = subprocess.run([sys.executable, str(DATA / "make_modules.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
