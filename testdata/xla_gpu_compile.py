"""XLA:GPU's optimized HLO for HLO text modules, without a GPU: the deviceless (ahead-of-time)
compile of jax's CUDA plugin for a described GPU. The testdata generators use it to keep XLA's
own optimized modules beside ours (XLA:GPU's fusions, Triton GEMMs, cuBLAS and cuDNN calls).

    python testdata/xla_gpu_compile.py --target H100.txtpb --out-dir DIR MODULE.hlo ...

Needs jax's CUDA plugin of jax's version (jax-cuda12-plugin and jax-cuda12-pjrt) and a
GpuTargetConfigProto text file (XLA's xla/backends/gpu/target_config/specs/h100_sxm.txtpb).
Writes DIR/<name>.hlo for each MODULE (its stem); a module XLA rejects is named on stderr.
With `--thunks`, also DIR/<stem>.xla_thunks.txt: the `thunk_sequence.txt` XLA dumps for the
module (its kernels' launch grids, threads and shared memory), from `--xla_dump_to`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def xla_gpu_text(hlo_text: str, target: str) -> str:
    """XLA:GPU's optimized module for `hlo_text` (printed without metadata), compiled for the
    target file."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib import _jax, xla_client as xc
    from jax._src.lib.mlir import ir
    from jax.experimental import topologies

    topo = topologies.get_topology_desc(platform="cuda", target_config=Path(target).read_text(),
                                        topology="1x1x1")
    dev = topo.devices[0]
    hlo = xc.hlo.hlo_module_from_text(hlo_text)
    mlir_bytes = _jax.mlir.hlo_to_stablehlo(hlo.as_serialized_hlo_module_proto())
    with jmlir.make_ir_context():
        exe = dev.client.compile(ir.Module.parse(mlir_bytes), executable_devices=_jax.DeviceList((dev,)),
                                 compile_options=xc.CompileOptions())
    options = xc.hlo.HloPrintOptions()
    options.print_metadata = False  # op names and source lines: most of the text, no semantics
    return exe.hlo_modules()[0].to_string(options)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True, help="GpuTargetConfigProto text file")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--thunks", action="store_true", help="also keep XLA's thunk_sequence.txt per module")
    ap.add_argument("modules", nargs="+")
    opts = ap.parse_args(argv)
    if opts.thunks:
        return _with_thunks(opts)
    out = Path(opts.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in opts.modules:
        path = Path(name)
        try:
            (out / path.name).write_text(xla_gpu_text(path.read_text(), opts.target))
        except Exception as exc:  # noqa: BLE001 - XLA's rejection of one module; the others go on
            print(f"{path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _with_thunks(opts) -> int:
    """One child process per module (XLA reads --xla_dump_to once per process), each dumping into
    a directory of its own, whose thunk_sequence.txt is kept as <stem>.xla_thunks.txt."""
    import shutil
    import subprocess
    import tempfile

    failed = 0
    for name in opts.modules:
        path = Path(name)
        with tempfile.TemporaryDirectory() as dump:
            env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}")
            command = [sys.executable, __file__, "--target", opts.target, "--out-dir", opts.out_dir, name]
            done = subprocess.run(command, env=env)
            found = sorted(Path(dump).glob("*thunk_sequence.txt"))
            if done.returncode or len(found) != 1:
                print(f"{path}: no thunk sequence ({len(found)} dumped)", file=sys.stderr)
                failed += 1
                continue
            shutil.copy(found[0], Path(opts.out_dir) / (path.name[:-len(".hlo")] + ".xla_thunks.txt"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
