"""LLVM lowering of the kernel IR, for two targets from one kernel.

Where it sits: after the emitters (hlo_codegen.emitters) and before ptx.py / the host JIT
(hlo_run.host_kernel). `lower_to_nvptx(kernel)` gives NVPTX LLVM IR (a `ptx_kernel`);
`lower_to_host(kernel)` gives a CPU function that runs thread blocks, with the block's threads
as loops and barriers splitting phases. Both share `lowering.py` (control flow, memory,
functions), `arith.py` (scalar ops), `floats.py` (narrow-float conversions) and `math.py` (own
transcendental functions; NVPTX prefers libdevice, see libdevice.py). The text is built with
`text.py`; llvmlite only parses it later.
"""

from hlo_codegen.llvm.host import lower_to_host
from hlo_codegen.llvm.lowering import LoweringError
from hlo_codegen.llvm.nvptx import lower_to_nvptx

__all__ = ["lower_to_host", "lower_to_nvptx", "LoweringError"]
