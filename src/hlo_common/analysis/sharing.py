"""When may an instruction write its output into an operand's buffer?

Two questions buffer assignment and copy insertion ask, as XLA does:

- `in_place_pairs(instr)`: (operand number, operand index) -> output index pairs of ops that
  update an operand in place (XLA's `GetInPlaceInputOutputPairs`): dynamic-update-slice, scatter,
  fusions whose root is a DUS/scatter chain on a fusion parameter, and custom-calls with
  `output_to_operand_aliasing`.
- `can_share_operand_buffer_with_user(...)` (XLA's `CanShareOperandBufferWithUser` plus the GPU
  hint `FusionCanShareBufferHint`): may the user's output at `user_index` reuse the buffer of the
  operand value at `operand_index` when that value dies at the user? Elementwise ops can; a fusion
  can when the parameter reaches the output through elementwise ops and bitcasts only.

    >>> can_share_operand_buffer_with_user(exp_operand, (), negate_user, ())   # doctest: +SKIP
    True
"""

from __future__ import annotations

import re
from collections import deque

from hlo_common.errors import HloError
from hlo_common.hlo.graph import depth_first
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape

Index = tuple[int, ...]
AliasSpec = list[tuple[Index, int, Index, str]]  # (output index, operand/param number, its index, kind)

_ALIAS_ENTRY = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*(?:,\s*([\w-]+)\s*)?\)")


def _parse_index(text: str) -> Index:
    return tuple(int(t) for t in text.replace(" ", "").split(",") if t)


def parse_alias_spec(text: str, what: str) -> AliasSpec:
    """`{ {0}: (0, {}, may-alias), {1}: (1, {0}) }` -> [((0,), 0, (), 'may-alias'), ((1,), 1, (0,), '')].

    Used for the module's `input_output_alias` and custom-call `output_to_operand_aliasing`."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise HloError(f"malformed {what}: {text!r}")
    body = body[1:-1]
    out: AliasSpec = []
    pos = 0
    for m in _ALIAS_ENTRY.finditer(body):
        if body[pos:m.start()].strip(" ,"):
            raise HloError(f"malformed {what}: {text!r}")
        out.append((_parse_index(m.group(1)), int(m.group(2)), _parse_index(m.group(3)), m.group(4) or ""))
        pos = m.end()
    if body[pos:].strip(" ,"):
        raise HloError(f"malformed {what}: {text!r}")
    return out


def custom_call_aliasing(instr: HloInstruction) -> AliasSpec:
    raw = instr.attrs.get("output_to_operand_aliasing")
    if raw is None:
        return []
    return parse_alias_spec(str(raw), f"output_to_operand_aliasing of %{instr.name}")


# -- in-place pairs ---------------------------------------------------------------------------------
def _scatter_pairs(instr: HloInstruction) -> list[tuple[int, Index, Index]]:
    n = len(instr.shape.tuple_shapes) if instr.shape.is_tuple else 1
    return [(i, (), (i,) if instr.shape.is_tuple else ()) for i in range(n)]


def _fusion_pairs(fusion: HloInstruction) -> list[tuple[int, Index, Index]]:
    """A fusion whose output at some index is a DUS/scatter chain ending on a fusion parameter."""
    root = fusion.fused_computation().root
    if root.opcode == "tuple":
        outputs = [((i,), op, 0) for i, op in enumerate(root.operands)]
    elif root.opcode == "scatter" and root.shape.is_tuple:  # variadic scatter: output i <- input i
        outputs = [((i,), root, i) for i in range(len(root.shape.tuple_shapes))]
    else:
        outputs = [((), root, 0)]
    pairs = []
    for out_index, node, k in outputs:
        if node.opcode == "bitcast":
            node = node.operands[0]
        seen = 0
        while node.opcode in ("dynamic-update-slice", "scatter") and seen < 64:
            if node.opcode == "scatter" and node.shape.is_tuple and node is not root:
                break  # a variadic scatter under a tuple root: no pair
            node, seen, k = node.operands[k], seen + 1, 0
        if seen and node.opcode == "parameter":
            pairs.append((node.parameter_number, (), out_index))
    return pairs


def in_place_pairs(instr: HloInstruction) -> list[tuple[int, Index, Index]]:
    """(operand number, operand index, output index) for each operand the op updates in place."""
    op = instr.opcode
    if op == "dynamic-update-slice":
        return [(0, (), ())]
    if op == "scatter":
        return _scatter_pairs(instr)
    if op == "fusion":
        return _fusion_pairs(instr)
    if op == "custom-call":
        return [(n, pidx, oidx) for oidx, n, pidx, _ in custom_call_aliasing(instr)]
    return []


# -- elementwise-ness --------------------------------------------------------------------------------
def is_elementwise_on_operand(instr: HloInstruction, operand_number: int) -> bool:
    op = instr.opcode
    if op == "fusion":
        param = instr.fused_computation().parameter(operand_number)
        return all(is_elementwise(user.opcode) and user.opcode != "copy"
                   for node in depth_first([param], lambda n: n.users) for user in node.users)
    if op == "dynamic-update-slice":
        return operand_number == 0
    if op == "bitcast-convert":
        a, b = instr.shape, instr.operands[operand_number].shape
        return a.element_type.bits == b.element_type.bits
    if op == "map":
        return True
    return is_elementwise(op)


def _shapes_equal(a: Shape, b: Shape) -> bool:
    return a == b


def _buffer_fits(operand: Shape, output: Shape) -> bool:
    """The operand's buffer can hold the output: the same shape, or arrays of as many elements of
    the same byte size."""
    if operand == output:
        return True
    return (operand.is_array and output.is_array and operand.num_elements == output.num_elements
            and operand.element_type.byte_size == output.element_type.byte_size)


def _same_memory_order(operand: Shape, result: Shape) -> bool:
    """Whether an op that reads `operand` at the logical index it writes `result` (elementwise,
    a scatter or DUS input) also reads the physical offset it writes: same layout. XLA can assume
    it after layout normalization; a fusion written by hand (or a scheduled input) may add a
    {0,1} value to a {1,0} one, and then writing over the operand would clobber unread elements."""
    if not (operand.is_array and result.is_array) or operand.dims != result.dims:
        return True  # not read element for element (a DUS update, a dynamic-slice): judged below
    return [d for d in operand.minor_to_major if operand.dims[d] != 1] == \
        [d for d in result.minor_to_major if result.dims[d] != 1]


def fusion_can_share_buffer_hint(fusion: HloInstruction, operand: HloInstruction, user_index: Index) -> bool:
    """XLA:GPU's FusionCanShareBufferHint, without the reduction-emitter exception: the fusion
    parameter must reach the output only through elementwise ops, bitcasts, and as operand 0 of a
    DUS/scatter root (a DS reading exactly the DUS's slice is allowed); and, beyond XLA, each op on
    the path but bitcasts and tuples must keep the memory order (`_same_memory_order`)."""
    if not _buffer_fits(operand.shape, fusion.shape.subshape(user_index)):
        return False
    if fusion.operands.count(operand) != 1:
        return False
    comp = fusion.fused_computation()
    param = comp.parameter(fusion.operands.index(operand))
    output = comp.root
    if output.opcode == "tuple":
        output = output.operands[user_index[0]]
    root = output.operands[0] if output.opcode == "bitcast" else output
    queue, visited, found = deque([param]), {id(param)}, False
    while queue:
        node = queue.popleft()
        if node is output:
            found = True
        for user in node.users:
            if id(user) not in visited:
                visited.add(id(user))
                queue.append(user)
            k = user.operands.index(node)
            if user.opcode not in ("bitcast", "tuple") and not _same_memory_order(node.shape, user.shape):
                return False
            if user is root and user.opcode == "scatter":
                n_inputs = len(user.shape.tuple_shapes) if user.shape.is_tuple else 1
                if k < n_inputs and user.operands.count(node) == 1:
                    if user.shape.is_tuple and user is comp.root and tuple(user_index) != (k,):
                        return False  # variadic scatter writes output i over input i only
                    continue
            if (root.opcode == "dynamic-update-slice" and user.opcode == "dynamic-slice"
                    and user.operands[0] is root.operands[0] and user.shape == root.operands[1].shape):
                if not (user.shape.num_elements == 1 and root.operands[1].shape.num_elements == 1):
                    starts = range(1, len(user.operands))
                    if any(user.operands[j] is not root.operands[j + 1] for j in starts):
                        return False
                continue
            elementwise = is_elementwise_on_operand(user, k) and user.opcode != "copy"
            if not elementwise and user.opcode not in ("bitcast", "tuple"):
                if not (user is root and user.opcode == "dynamic-update-slice" and k == 1):
                    return False
    if comp.root.opcode == "tuple" and not is_elementwise(root.opcode):
        if any(op is not output and id(op) in visited for op in comp.root.operands):
            return False
    return found


def can_share_operand_buffer_with_user(operand: HloInstruction, operand_index: Index,
                                       user: HloInstruction, user_index: Index) -> bool:
    """May `user`'s output at `user_index` live in the buffer of `operand`'s value at
    `operand_index` (the value dying at `user`)?"""
    if operand.opcode == "constant":
        return False
    op_sub = operand.shape.subshape(operand_index)
    user_sub = user.shape.subshape(user_index)
    shapes_equal = _shapes_equal(op_sub, user_sub)
    k_numbers = [k for k, o in enumerate(user.operands) if o is operand]
    if shapes_equal:
        for n, pidx, oidx in in_place_pairs(user):
            if oidx == tuple(user_index) and n in k_numbers and pidx == tuple(operand_index):
                return True
    if user.opcode == "fusion":
        return fusion_can_share_buffer_hint(user, operand, tuple(user_index))
    if user.opcode == "custom-call":
        return False
    if not shapes_equal:
        return False
    if user.opcode in ("while", "conditional"):
        return True
    if user.opcode in ("dynamic-update-slice", "scatter", "triangular-solve", "set-dimension-size"):
        want = 1 if user.opcode == "triangular-solve" else 0
        return k_numbers == [want]
    if user.opcode == "sort":
        if len(operand.users) != 1:
            return False
        if len(user.operands) == 1:
            return True
        return len(k_numbers) == 1 and user_index and user_index[0] == k_numbers[0]
    if user.opcode == "call":
        return False  # callee roots alias the call result already
    if user.opcode == "copy":
        return False
    return all(is_elementwise_on_operand(user, k) for k in k_numbers) and bool(k_numbers)
