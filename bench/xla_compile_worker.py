"""Compiles many HLO modules with XLA:GPU for an H100 without a GPU, in one process (a helper of
bench/launch_dims_vs_xla.py, run under a Python that has jax and its CUDA plugin).

    /work/jaxgpu/bin/python bench/xla_compile_worker.py MODULE.hlo ...

For dumps, XLA_FLAGS must already hold `--xla_dump_to=DUMP_DIR` (set by the caller before this
process starts: XLA reads its flags once). Each module is compiled with the recipe of
`../shared/tools/xla_gpu_hlo.py`; XLA writes its optimized HLO, PTX and `thunk_sequence.txt`
under DUMP_DIR, named after the module. One line per module on stdout: `ok PATH` or
`error PATH: message` (a module XLA rejects does not stop the others).
"""

from __future__ import annotations

import os
import re
import sys

TARGET = "/work/shared/devices/h100_sxm.txtpb"


def main(argv: list[str]) -> int:
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import jax  # noqa: F401
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib import _jax, xla_client as xc
    from jax._src.lib.mlir import ir
    from jax.experimental import topologies

    target = os.environ.get("XLA_TARGET_CONFIG", TARGET)
    topo = topologies.get_topology_desc(platform="cuda", target_config=open(target).read(),
                                        topology="1x1x1")
    dev = topo.devices[0]
    for path in argv[1:]:
        try:
            hlo = xc.hlo.hlo_module_from_text(open(path).read())
            mlir_bytes = _jax.mlir.hlo_to_stablehlo(hlo.as_serialized_hlo_module_proto())
            with jmlir.make_ir_context():
                mod = ir.Module.parse(mlir_bytes)
                dev.client.compile(mod, executable_devices=_jax.DeviceList((dev,)),
                                   compile_options=xc.CompileOptions())
            print(f"ok {path}", flush=True)
        except Exception as e:  # noqa: BLE001  (any XLA rejection is reported, the loop goes on)
            text = str(e)
            op = re.search(r"failed to legalize operation '([\w.]+)'", text)
            line = text.splitlines()[0] if text else type(e).__name__
            print(f"error {path}: {line}{f' ({op.group(1)} cannot be imported)' if op else ''}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
