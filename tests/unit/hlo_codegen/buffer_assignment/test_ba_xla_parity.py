"""Our `-buffer-assignment.txt` equals the one real XLA wrote for the same scheduled module.

The expected dumps come from XLA:CPU (jaxlib 0.10.2), see `xla_cpu/README.md`: XLA's BufferAssigner
is shared by CPU and GPU, so allocation order (size, live-out, post order), value ids (embedded
computations included), operand reuse of output allocations and the best-fit packing of the
temporaries must all agree. XLA:CPU also gives reducers' scalars `thread-local` allocations, which
this project does not allocate (embedded computations run inside kernels); they are dropped from
XLA's text before comparing, and the later allocations renumbered.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlo_common.hlo.parser import parse_module
from hlo_codegen.buffer_assignment import assign_buffers, check_buffer_assignment

DATA = Path(__file__).parent / "xla_cpu"
CASES = ["chain", "slice_temps", "reduce_thread_local", "dus_in_place"]


def drop_thread_local(text: str) -> str:
    """Remove `thread-local` allocations and renumber the ones after them."""
    out, index, skip = [], 0, False
    for line in text.splitlines():
        m = re.match(r"allocation (\d+): (.*)$", line)
        if m:
            skip = "thread-local" in m.group(2)
            if not skip:
                out.append(f"allocation {index}: {m.group(2)}")
                index += 1
            continue
        if not skip:
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", CASES)
def test_dump_matches_xla_cpu(name):
    module = parse_module((DATA / f"{name}.hlo").read_text(), f"{name}.hlo")
    assignment = assign_buffers(module)
    expected = drop_thread_local((DATA / f"{name}.buffer-assignment.txt").read_text())
    assert assignment.to_string() == expected
    assert check_buffer_assignment(assignment) == []


def test_drop_thread_local_renumbers():
    text = ("BufferAssignment:\nallocation 0: size 4, constant:\n value: <1 c @0> (size=4,offset=0): f32[]\n"
            "allocation 1: size 4, thread-local:\n value: <0 x @0> (size=4,offset=0): f32[]\n"
            "allocation 2: size 8, preallocated-temp:\n value: <2 t @0> (size=8,offset=0): f32[2]{0}\n")
    assert drop_thread_local(text) == (
        "BufferAssignment:\nallocation 0: size 4, constant:\n value: <1 c @0> (size=4,offset=0): f32[]\n"
        "allocation 1: size 8, preallocated-temp:\n value: <2 t @0> (size=8,offset=0): f32[2]{0}\n")


_COMPILE = r"""
import sys, jax, jax.extend
from jax._src.lib import _jax, xla_client as xc
m = xc.hlo.hlo_module_from_text(open(sys.argv[1]).read())
mlir = _jax.mlir.hlo_to_stablehlo(m.as_serialized_hlo_module_proto())
be = jax.extend.backend.get_backend("cpu")
exe = be.compile_and_load(mlir, _jax.DeviceList((be.local_devices()[0],)), xc.CompileOptions())
open(sys.argv[2], "w").write(exe.hlo_modules()[0].to_string())
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_xla_cpu_live_parity(name, tmp_path):
    """Recompile the source with real XLA now and compare with what we assign to its result."""
    pytest.importorskip("jax")
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_disable_all_hlo_passes=true")
    out = tmp_path / "optimized.hlo"
    subprocess.run([sys.executable, "-c", _COMPILE, str(DATA / f"{name}.source.hlo"), str(out)],
                   env=env, check=True, capture_output=True, timeout=300)
    dumps = list(tmp_path.glob("*after_optimizations-buffer-assignment.txt"))
    assert len(dumps) == 1
    module = parse_module(out.read_text(), str(out))
    assert assign_buffers(module).to_string() == drop_thread_local(dumps[0].read_text())
