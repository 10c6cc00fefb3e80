"""The handlers of the ops beyond the core ones in `hlo_opt.spmd.handlers`, by opcode: each takes
the `Partitioner` and the instruction and returns False where it does not apply (the op then
runs whole, replicated)."""

from __future__ import annotations

from hlo_opt.spmd import (
    control_handlers,
    conv_handlers,
    dynamic_handlers,
    gather_handlers,
    reduce_handlers,
    sort_handlers,
    window_handlers,
)

HANDLERS = dict(window_handlers.HANDLERS)
HANDLERS.update(gather_handlers.HANDLERS)
HANDLERS.update(dynamic_handlers.HANDLERS)
HANDLERS["while"] = control_handlers.handle_while
HANDLERS["conditional"] = control_handlers.handle_conditional
HANDLERS["convolution"] = conv_handlers.handle_convolution
HANDLERS["sort"] = sort_handlers.handle_sort
HANDLERS["reduce"] = reduce_handlers.handle_variadic_reduce  # tuple-shaped only (handlers.py)
