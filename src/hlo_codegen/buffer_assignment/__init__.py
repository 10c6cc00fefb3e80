"""Buffer assignment: every array an instruction produces gets a slice of a device allocation.

Where it sits: hlo-codegen, after the optimized (fused, scheduled) module is read and before
thunks are emitted (XLA:GPU's `RunBufferAssignment`). Thunks and kernels are parameterized by the
slices this package hands out; `hlo-run` allocates the `BufferAllocation`s.

Pipeline (one module each, XLA's names; steps 1-3 and copy insertion are shared analyses in
`hlo_common.analysis`, which hlo-opt's copy-insertion and scheduler passes use too):

1. `dataflow.HloDataflowAnalysis` - an `HloValue` per array leaf an instruction defines; values
   flow through bitcast, get-tuple-element, tuple, while/call/conditional, opt-barrier.
2. `live_range.HloLiveRange` - the flattened schedule (`is_scheduled=true`: text order; otherwise
   `post_order()`) and each value's [definition, last use].
3. `alias.HloAliasAnalysis` - values that must share memory become one `HloBuffer`: while state,
   conditional results, `input_output_alias`, custom-call `output_to_operand_aliasing`, and
   in-place DUS/scatter/fusions when their operand dies there.
4. `assignment.BufferAssigner` - parameters, constants and live-out buffers get their own
   allocations; temporaries are packed by `heap_simulator` into one `preallocated-temp`.
5. `dump` (XLA's `-buffer-assignment.txt`), `checker` (proves the result sound).

Embedded computations (fusion bodies, reducers, comparators) get no buffers. A module with
control flow that was not through copy insertion may need copies first: `insert_copies(module)`
(mutates the module; XLA's CopyInsertion, simplified) - `assign_buffers` raises `HloError` and
says so when they are missing.

Example:

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module('''
    ... ENTRY e {
    ...   p = f32[256] parameter(0)
    ...   a = f32[256] exponential(p)
    ...   b = f32[256] sine(a)
    ...   ROOT c = f32[256] add(a, b)
    ... }''')
    >>> ba = assign_buffers(m)
    >>> ba.get_slice(m.entry.root)                       # the output allocation
    Slice(index=0, offset=0, size=1024)
    >>> [a.index for a in ba.allocations if a.is_entry_computation_parameter]
    [1]
    >>> check_buffer_assignment(ba)                      # [] = sound
    []
    >>> print(ba.to_string().splitlines()[1])
    allocation 0: size 1024, output shape is |f32[256]|, maybe-live-out:

Codegen's contract: `get_slice(instruction, shape_index)` for every array output of every
instruction of a global computation (a bitcast, get-tuple-element or tuple position answers with
the slice of the value it forwards); `shares_slice(...)` tells whether an in-place op really
writes over its operand (if not, the emitter copies the operand into the output slice first).
"""

from hlo_common.analysis.copy_insertion import insert_copies

from hlo_codegen.buffer_assignment.assignment import (
    BufferAllocation, BufferAssignment, Slice, assign_buffers)
from hlo_codegen.buffer_assignment.checker import check_buffer_assignment, verify_buffer_assignment

__all__ = [
    "BufferAllocation", "BufferAssignment", "Slice", "assign_buffers", "check_buffer_assignment",
    "verify_buffer_assignment", "insert_copies",
]
