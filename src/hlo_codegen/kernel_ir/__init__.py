"""The kernel IR: a small, printable SSA IR whose structure mirrors XLA's MLIR emitters.

Where it sits: emitters (hlo_codegen.emitters) build a `Kernel` from a fusion with the
`IRBuilder`; `transforms` inline subgraph functions and vectorize loads/stores; the LLVM
lowering (hlo_codegen.llvm) turns it into NVPTX or host LLVM IR. Every kernel round-trips
through text (`print_kernel` / `parse_kernel`), which is what `--dump-to` writes.

A kernel is: launch dimensions (grid, block); buffers (parameters = the fusion's operands then
its outputs, flat 1-D in physical order; shared-memory arrays; constant globals); subgraph
functions (`func @f(%d0: index, ...) -> (f32)`, from the computation partitioner); and a body of
ops. Body ops: `thread_id` / `block_id`, `loop` (XLA's `xla_gpu.loop`: a loop nest over an
`IndexingMap`'s range variables, skipping points outside its domain, with scalar `iter_args`),
`if`, `apply_indexing`, scalar arithmetic named as in MLIR's arith/math dialects (`addf`,
`divsi`, `cmpf olt`, `exp`, `extf`, ...), `load` / `store` (vector-typed when vectorized),
`vector.extract` / `vector.insert`, `call`, and - only directly in the kernel body -
`sync_threads` and `shuffle_reduce` (warp butterfly reduction with a reducer function), where
the host lowering splits the kernel into phases.
"""

from hlo_codegen.kernel_ir.builder import FunctionBuilder, IRBuilder, NameTable
from hlo_codegen.kernel_ir.ir import OP_SPECS, Block, Buffer, Function, Kernel, Op, OpSpec, Value
from hlo_codegen.kernel_ir.parser import parse_kernel
from hlo_codegen.kernel_ir.printer import print_kernel
from hlo_codegen.kernel_ir.verifier import verify_kernel

__all__ = [
    "Block", "Buffer", "Function", "Kernel", "Op", "OpSpec", "OP_SPECS", "Value", "IRBuilder",
    "FunctionBuilder", "NameTable", "parse_kernel", "print_kernel", "verify_kernel",
]
