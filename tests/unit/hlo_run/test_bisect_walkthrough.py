"""The planting step of bench/bisect_walkthrough.sh (the bug-report walkthrough of docs/bisector.md): its
plant_bound_bug.py, taken from the script as written, picks the first kernel that computes an xor
with more than one thread per block, lowers that kernel's thread-loop bound by one and nothing
else, and hlo-run --find-first-mismatch then blames that kernel at the last element of each block,
which is what docs/bisector.md says of it."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_run.cli import cli
from hlo_run.compile_hook import compile_to_manifest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "bench" / "bisect_walkthrough.sh"

# compiled without hlo-opt, so every op is its own kernel: a one-thread xor (skipped), a broadcast
# with 256 threads but no xor (skipped), then the xor over u32[4,64] that must be planted
MODULE = """HloModule planted
ENTRY e {
  p = u32[] parameter(0)
  q = u32[] parameter(1)
  s = u32[] xor(p, q)
  x = u32[4,64] parameter(2)
  b = u32[4,64] broadcast(s), dimensions={}
  ROOT r = u32[4,64] xor(x, b)
}
"""


def planting_script() -> str:
    text = SCRIPT.read_text()
    m = re.search(r"cat > plant_bound_bug\.py <<'EOF'\n(.*?)\nEOF\n", text, re.S)
    assert m, "bench/bisect_walkthrough.sh no longer writes plant_bound_bug.py from a heredoc"
    return m.group(1)


def test_planting_breaks_the_last_thread_of_each_block_of_the_first_xor_kernel(tmp_path):
    manifest = compile_to_manifest(MODULE, "planted.hlo", "host", optimize=False)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_bytes(manifest.to_bytes())
    plant = tmp_path / "plant_bound_bug.py"
    plant.write_text(planting_script())
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, str(plant), str(good), str(bad)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # the kernel that computes `r` (hlo-codegen wraps it in a fusion of its own name)
    roots = {i.name: i.fused_computation().root.name for c in parse_module(manifest.hlo).computations
             for i in c.instructions if i.opcode == "fusion"}
    (target,) = [t for t in manifest.all_thunks()
                 if t.kind == "kKernel" and roots[t.profile_annotation] == "r"]
    threads, blocks = math.prod(target.block), math.prod(target.grid)
    assert threads > 1 and blocks > 1  # several blocks, or the test would say little
    assert re.fullmatch(rf"thunk \d{{3}} kKernel {re.escape(target.profile_annotation)} \(kernel "
                        rf"{re.escape(target.kernel)}, {blocks} block\(s\) of {threads} threads\): "
                        rf"`%\S+ = icmp sle i64 %\S+, {threads - 1}` -> "
                        rf"`%\S+ = icmp sle i64 %\S+, {threads - 2}`\n", done.stdout), done.stdout
    # exactly one line of one kernel changed, the thread-loop bound
    planted = load_manifest(bad.read_bytes(), "bad")
    changed = [name for name in sorted(manifest.kernels)
               if manifest.kernels[name].llvm_ir != planted.kernels[name].llvm_ir]
    assert changed == [target.kernel]
    before = manifest.kernels[target.kernel].llvm_ir.splitlines()
    after = planted.kernels[target.kernel].llvm_ir.splitlines()
    diff = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and len(diff) == 1
    assert diff[0][1] == re.sub(rf", {threads - 1}$", f", {threads - 2}", diff[0][0])

    result = CliRunner().invoke(cli, ["--platform=cpu", "--find-first-mismatch", "--mismatch-dir",
                                      str(tmp_path / "m"), str(bad)], catch_exceptions=False)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"kKernel {target.profile_annotation} (kernel {target.kernel})" in lines[0], lines[0]
    # the elements wrong are the last of each block of `threads` elements (row-major u32[4,64])
    last = [k * threads + threads - 1 for k in range(blocks)]
    wrong = [(i // 64, i % 64) for i in last]
    text = result.stdout
    assert f"{len(wrong)} of 256 element(s) differ" in text
    for i, j in wrong:
        assert f"at [{i}, {j}]: got" in text
