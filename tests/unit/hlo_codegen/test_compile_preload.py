"""hlo-codegen's preload: behind `hlo-opt |` the compiler's modules load while hlo-opt works, so
once the input is there a compile imports nothing more of the toolchain (what it imported after
the input was on the clock of every `hlo-opt m.hlo | hlo-codegen` run)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# A reduction, math that links libdevice, a loop fusion and a GEMM: the emitters, the lowering's
# helpers, the verifier, the reducer probe and the Triton GEMM emitter's modules all take part.
MODULE = """HloModule jit_m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[64,128] parameter(0)
  w = f32[128,32] parameter(1)
  t = f32[64,128] tanh(p)
  z = f32[] constant(0)
  r = f32[64] reduce(t, z), dimensions={1}, to_apply=add
  d = f32[64,32] dot(t, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT o = (f32[64], f32[64,32]) tuple(r, d)
}
"""

SCRIPT = """
import json, sys
from hlo_common.hlo.parser import parse_module
from hlo_codegen.compiler import CompileOptions, compile_module, preload
options = CompileOptions(target=sys.argv[1], cache_dir=None)
preload(options)
before = set(sys.modules)
compile_module(parse_module(sys.stdin.read(), "m"), options).manifest.to_bytes()
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith(("hlo_", "numpy")))))
"""


@pytest.mark.parametrize("target", ["host", "cuda"])
def test_a_compile_after_preload_imports_nothing_more(target):
    if target == "cuda":
        pytest.importorskip("cuda.bindings.nvjitlink")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, target], input=MODULE, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
