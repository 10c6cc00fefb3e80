"""The IR's attributes, shapes and shardings as HloInstructionProto fields: the inverse of
`proto_attrs` / `proto_values` (same tables, `proto_tables`), for `hlo_to_proto`.

Each attribute the parser types (hlo_common.hlo.attributes.ATTR_KINDS) has one writer below; an
attribute without one is a ProtoError naming the instruction, so nothing is dropped in silence.
"""

from __future__ import annotations

import re

from hlo_common.hlo.attributes import LiteralAttr, RawAttr
from hlo_common.hlo.strings import c_unescape
from hlo_common.proto import proto_tables as T
from hlo_common.proto.proto_values import PROTO_ID, TOKEN_ID, TUPLE_ID, ProtoError, literal_to_proto

_PRECISION = T.inverse(T.PRECISION)
_ALGORITHM = T.inverse(T.ALGORITHM)
_API = T.inverse(T.API_VERSION)
_SCHEDULE = T.inverse(T.CUSTOM_CALL_SCHEDULE)
_FFT = T.inverse(T.FFT_TYPE)
_TRANSPOSE = T.inverse(T.TRANSPOSE)
_DISTRIBUTION = T.inverse(T.DISTRIBUTION)
_RNG_ALGORITHM = T.inverse(T.RNG_ALGORITHM)
_SHARDING_TYPE = T.inverse(T.SHARDING_WORD)
_SCAN_ASSOCIATIVE = T.inverse(T.SCAN_ASSOCIATIVE)
_GATHER = ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
           "start_indices_batching_dims")
_SCATTER = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
            "input_batching_dims", "scatter_indices_batching_dims")
_DOT = {"lhs_batch_dims": "lhs_batch_dimensions", "lhs_contracting_dims": "lhs_contracting_dimensions",
        "rhs_batch_dims": "rhs_batch_dimensions", "rhs_contracting_dims": "rhs_contracting_dimensions"}
# attribute -> HloInstructionProto field holding it as is (ints, bools, strings).
_PLAIN = {"index": "tuple_index", "dynamic_slice_sizes": "dynamic_slice_sizes",
          "feature_group_count": "feature_group_count", "batch_group_count": "batch_group_count",
          "dimensions": "dimensions", "direction": "comparison_direction", "type": "comparison_type",
          "slice_sizes": "gather_slice_sizes", "indices_are_sorted": "indices_are_sorted",
          "unique_indices": "unique_indices", "is_stable": "is_stable", "k": "k", "largest": "largest",
          "exponent_bits": "exponent_bits", "mantissa_bits": "mantissa_bits", "fft_length": "fft_length",
          "epsilon": "epsilon", "feature_index": "feature_index", "delta": "delta",
          "channel_id": "channel_id",
          "use_global_device_ids": "use_global_device_ids", "constrain_layout": "constrain_layout",
          "custom_call_target": "custom_call_target",
          "custom_call_has_side_effect": "custom_call_has_side_effect",
          "is_host_transfer": "is_host_transfer", "is_composite": "is_composite", "kind": "fusion_kind",
          "async_execution_thread": "async_execution_thread", "num_carries": "scan_num_carries",
          "is_reverse": "scan_is_reverse"}


def write_attrs(p, instr, comp_ids: dict, where: str) -> None:
    """Every attribute of `instr` (called computations included) into instruction proto `p`."""
    called = T.called_order(instr.opcode, instr.called_computations())
    p.called_computation_ids.extend(comp_ids[c] for c in called)
    for key, value in instr.attrs.items():
        if key in _CALLED_KEYS or key == "async_wrapped_opcode":
            continue
        if isinstance(value, RawAttr):
            value = _raw(key, value.text, where)
        try:
            _write_one(p, instr, key, value)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise ProtoError(f"{where}: attribute '{key}' cannot be written to an HloInstructionProto "
                             f"({type(exc).__name__}: {exc})") from None
    if instr.opcode == "compare" and not p.comparison_type:
        first = instr.operands[0].shape.element_type if instr.operands else None
        p.comparison_type = T.default_comparison(PROTO_ID.get(first.name) if first else None)
    if instr.opcode == "custom-call" and "api_version" not in instr.attrs:
        p.custom_call_api_version = _API["API_VERSION_ORIGINAL"]  # XLA's parser's default
    if instr.opcode in ("dot", "ragged-dot", "scaled-dot"):
        _dot_numbers(p, instr.opcode).SetInParent()
    if instr.opcode == "outfeed" and "outfeed_shape" not in instr.attrs and instr.operands:
        # XLA's parser gives an outfeed its operand's shape, laid out; CreateFromProto needs one
        write_shape(p.outfeed_shape, _laid_out(instr.operands[0].shape), where)


def _laid_out(shape):
    """`shape` with the default layout wherever it has none (what XLA's parser gives a shape)."""
    from hlo_common.hlo.shape import Shape

    if shape.is_tuple:
        return Shape.tuple_of(_laid_out(s) for s in shape.tuple_shapes)
    return shape.with_default_layouts() if shape.is_array and shape.layout is None else shape


_CALLED_KEYS = frozenset({"calls", "to_apply", "condition", "body", "select", "scatter", "true_computation",
                          "false_computation", "branch_computations", "called_computations"})


def _raw(key: str, text: str, where: str):
    """The attributes the parser keeps as text, made values the writers below take."""
    if key == "cross_program_prefetch_index":
        return int(text)
    if key in ("is_associative", "result_accuracy", "domain"):
        return text
    raise ProtoError(f"{where}: attribute '{key}' (kept as text) has no HloInstructionProto field in this "
                     "project's schema; the proto cannot hold it")


def _write_one(p, instr, key: str, value) -> None:
    op = instr.opcode
    if key in _PLAIN:
        field = _PLAIN[key]
        if isinstance(value, (tuple, list)):
            getattr(p, field).extend(value)
        else:
            setattr(p, field, value)
    elif key in _WRITERS:
        _WRITERS[key](p, value)
    elif key in _DOT:
        getattr(_dot_numbers(p, op), _DOT[key]).extend(value)
    elif key in _GATHER:
        getattr(p.gather_dimension_numbers, key).extend(value)
    elif key in _SCATTER:
        getattr(p.scatter_dimension_numbers, key).extend(value)
    elif key == "index_vector_dim":
        numbers = p.scatter_dimension_numbers if op == "scatter" else p.gather_dimension_numbers
        numbers.index_vector_dim = value
    elif key == "algorithm":
        if op == "rng-bit-generator":
            p.rng_algorithm = _RNG_ALGORITHM[value]
        else:
            p.precision_config.algorithm = _ALGORITHM["ALG_" + value.upper()]
    elif key == "lower":
        (p.cholesky_options if op == "cholesky" else p.triangular_solve_options).lower = value
    elif key in ("left_side", "unit_diagonal"):
        setattr(p.triangular_solve_options, key, value)
    else:
        raise KeyError(f"no HloInstructionProto field for '{key}' in this project's schema")


def _dot_numbers(p, op: str):
    if op == "ragged-dot":
        return p.ragged_dot_dimension_numbers.dot_dimension_numbers
    return p.dot_dimension_numbers


def _slice(p, spec) -> None:
    for start, limit, stride in spec.dims:
        p.slice_dimensions.add(start=start, limit=limit, stride=stride)


def _padding(p, config) -> None:
    p.padding_config.SetInParent()
    for lo, hi, interior in config.dims:
        p.padding_config.dimensions.add(edge_padding_low=lo, edge_padding_high=hi, interior_padding=interior)


def _window(p, window) -> None:
    p.window.SetInParent()
    for d in window.dims:
        p.window.dimensions.add(size=d.size, stride=d.stride, padding_low=d.padding_low,
                                padding_high=d.padding_high, window_dilation=d.window_dilation,
                                base_dilation=d.base_dilation, window_reversal=d.window_reversal)


def _dim_labels(p, c) -> None:
    d = p.convolution_dimension_numbers
    d.input_batch_dimension, d.input_feature_dimension = c.input_batch, c.input_feature
    d.input_spatial_dimensions.extend(c.input_spatial)
    d.kernel_input_feature_dimension, d.kernel_output_feature_dimension = c.kernel_input_feature, \
        c.kernel_output_feature
    d.kernel_spatial_dimensions.extend(c.kernel_spatial)
    d.output_batch_dimension, d.output_feature_dimension = c.output_batch, c.output_feature
    d.output_spatial_dimensions.extend(c.output_spatial)


def _replica_groups(p, groups) -> None:
    if groups.iota is not None:
        (g, s), dims, perm = groups.iota
        p.iota_collective_device_list.num_replica_groups = g
        p.iota_collective_device_list.num_devices_per_group = s
        p.iota_collective_device_list.iota_reshape_dims.extend(dims)
        p.iota_collective_device_list.iota_transpose_perm.extend(perm)
    elif groups.explicit is not None:
        for group in groups.explicit:
            p.replica_groups.add(replica_ids=group)
    else:
        _mesh_groups(p.mesh_axes_replica_group_list, groups.mesh)


def _mesh_groups(out, mesh) -> None:
    """MeshAxesReplicaGroupListProto: the mesh's axes, its device order (a list, or an iota
    transform as XLA keeps `device_ids=([2,4]T(1,0))`), and each grouped axis by its index."""
    out.mesh.SetInParent()
    for name, size in mesh.axes:
        out.mesh.axes.add(name=name, size=size)
    if mesh.device_ids is not None and mesh.device_ids[0] == "list":
        out.mesh.device_ids.extend(mesh.device_ids[1])
    elif mesh.device_ids is not None and list(mesh.device_ids[2] or ()) != sorted(mesh.device_ids[2] or ()):
        _, reshape, perm = mesh.device_ids  # an untransposed iota is the mesh's own order: XLA drops it
        out.mesh.iota_transform.reshape_dims.extend(reshape)
        out.mesh.iota_transform.transpose_perm.extend(perm)
    index = {name: k for k, (name, _) in enumerate(mesh.axes)}
    for name, pre, size in mesh.grouped:
        ref = out.axes.add(mesh_axis_index=index[name])
        if pre is not None:
            ref.sub_axis_info.pre_size, ref.sub_axis_info.size = pre, size


def _aliasing(p, aliasing) -> None:
    for out, operand, index in aliasing.entries:
        p.output_operand_aliasing.add(output_shape_index=out, operand_index=operand,
                                      operand_shape_index=index)


def _operand_layouts(p, shapes) -> None:
    p.constrain_layout = True
    for shape in shapes:
        write_shape(p.operand_shapes_with_layout.add(), shape, "operand_layout_constraints")


def _literal(p, value: LiteralAttr) -> None:
    write_shape(p.literal.shape, value.shape, "literal")
    literal_to_proto(value.value, p.literal.shape, p.literal)


def _result_accuracy(p, text: str) -> None:
    mode = re.fullmatch(r"\{\s*mode\s*=\s*(\w+)\s*\}", text)
    if mode:
        p.result_accuracy.mode = {"default": 0, "highest": 1}[mode.group(1).lower()]
        return
    fields = dict(re.findall(r"(atol|rtol|ulps)=([^,}\s]+)", text))
    if not fields:
        raise ValueError(f"unreadable result_accuracy '{text}'")
    tol = p.result_accuracy.tolerance
    tol.atol, tol.rtol, tol.ulps = float(fields.get("atol", 0)), float(fields.get("rtol", 0)), \
        int(fields.get("ulps", 0))


_DOMAIN_RE = re.compile(r'\{\s*kind\s*=\s*"sharding"\s*,\s*entry\s*=\s*(\{.*\})\s*,'
                        r'\s*exit\s*=\s*(\{.*\})\s*\}', re.S)


def _domain(p, text: str) -> None:
    """`domain={kind="sharding", entry=E, exit=X}`: XLA's printer writes the user side as `entry`
    and the operand side as `exit` (HloDomainInstruction, xla/hlo/ir/hlo_instructions.cc), and its
    ToProto keeps the operand side in domain_entry_sharding, the user side in domain_exit_sharding."""
    from hlo_common.hlo.sharding import HloSharding

    match = _DOMAIN_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"only sharding domains have HloInstructionProto fields, not '{text}'")
    user_side, operand_side = (HloSharding.parse(m) for m in match.groups())
    write_sharding(p.domain_exit_sharding, user_side, "domain entry")
    write_sharding(p.domain_entry_sharding, operand_side, "domain exit")


_WRITERS = {
    "domain": _domain,
    "iota_dimension": lambda p, v: p.dimensions.append(v),
    "slice": _slice,
    "padding": _padding,
    "window": _window,
    "dim_labels": _dim_labels,
    "lhs_ragged_dims": lambda p, v: p.ragged_dot_dimension_numbers.lhs_ragged_dimensions.extend(v),
    "rhs_group_dims": lambda p, v: p.ragged_dot_dimension_numbers.rhs_group_dimensions.extend(v),
    "operand_precision": lambda p, v: p.precision_config.operand_precision.extend(
        _PRECISION[w.upper()] for w in v),
    "distribution": lambda p, v: setattr(p, "distribution", _DISTRIBUTION[v]),
    "fft_type": lambda p, v: setattr(p, "fft_type", _FFT[v]),
    "transpose_a": lambda p, v: setattr(p.triangular_solve_options, "transpose_a", _TRANSPOSE[v]),
    "replica_groups": _replica_groups,
    "source_target_pairs": lambda p, v: [p.source_target_pairs.add(source=s, target=t) for s, t in v.pairs],
    "operand_layout_constraints": _operand_layouts,
    "literal": _literal,
    "output_to_operand_aliasing": _aliasing,
    "schedule": lambda p, v: setattr(p, "custom_call_schedule", _SCHEDULE[v]),
    "api_version": lambda p, v: setattr(p, "custom_call_api_version", _API[v]),
    "infeed_config": lambda p, v: setattr(p, "infeed_config", v.encode("utf-8")),
    "outfeed_config": lambda p, v: setattr(p, "outfeed_config", v.encode("utf-8")),
    "outfeed_shape": lambda p, v: write_shape(p.outfeed_shape, v, "outfeed_shape"),
    "is_associative": lambda p, v: setattr(p, "scan_is_associative", _SCAN_ASSOCIATIVE[v]),
    "cross_program_prefetch_index": lambda p, v: setattr(p, "cross_program_prefetch_index", v),
    "result_accuracy": _result_accuracy,
}


# -- shapes and shardings --------------------------------------------------------------------------
UNBOUNDED = -(1 << 63)  # Shape::kUnboundedSize
_LAYOUT_FIELDS = {"L": "tail_padding_alignment_in_elements", "E": "element_size_in_bits", "S": "memory_space",
                  "M": "dynamic_shape_metadata_prefix_bytes"}


def write_shape(out, shape, where: str) -> None:
    """Fill ShapeProto `out` from an IR Shape (the inverse of proto_values.shape_text)."""
    if shape.is_tuple:
        out.element_type = TUPLE_ID
        for s in shape.tuple_shapes:
            write_shape(out.tuple_shapes.add(), s, where)
        return
    if shape.is_buffer:
        out.element_type = PROTO_ID["buffer"]
        write_shape(out.tuple_shapes.add(), shape.buffer_of, where)
        return
    out.element_type = TOKEN_ID if shape.is_token else PROTO_ID[shape.element_type.name]
    if not shape.element_type.is_array_type:
        return
    dynamic = shape.dynamic or ("",) * len(shape.dims)
    out.dimensions.extend(UNBOUNDED if d == "?" else n for n, d in zip(shape.dims, dynamic))
    out.is_dynamic_dimension.extend(bool(d) for d in dynamic)
    if shape.layout is not None:
        _write_layout(out.layout, shape.layout, where)


def _write_layout(out, layout, where: str) -> None:
    out.SetInParent()
    out.minor_to_major.extend(layout.minor_to_major)
    for key, value in layout.extras:
        if key == "T":
            for tile in re.findall(r"\(([^)]*)\)", value):
                out.tiles.add(dimensions=[int(v) for v in tile.split(",") if v])
        elif key in _LAYOUT_FIELDS:
            setattr(out, _LAYOUT_FIELDS[key], int(value))
        else:
            raise ProtoError(f"{where}: layout field '{key}(...)' is not in this project's LayoutProto "
                             "schema")


_META_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|-?\d+)')


def write_metadata(m, pairs, where: str) -> None:
    """Fill OpMetadata `m` from (key, value as written) pairs."""
    for key, value in pairs:
        field = m.DESCRIPTOR.fields_by_name.get(key)
        if field is None:
            raise ProtoError(f"{where}: metadata field '{key}' is not in this project's OpMetadata schema")
        setattr(m, key, c_unescape(value[1:-1]) if field.type == field.TYPE_STRING else int(value))


def write_sharding(out, sharding, where: str) -> None:
    """Fill OpSharding `out` from an IR HloSharding (the inverse of proto_values.sharding_text)."""
    if sharding.shard_group:
        word, number = sharding.shard_group.split()
        out.is_shard_group, out.shard_group_id = True, int(number)
        out.shard_group_type = int(word == "shard_like")
    if sharding.metadata is not None:
        groups = re.findall(r"\{((?:[^{}\"]|\"(?:[^\"\\]|\\.)*\")*)\}", sharding.metadata) \
            if sharding.metadata.lstrip().startswith("{") else [sharding.metadata]
        for group in groups:
            write_metadata(out.metadata.add(), _META_PAIR.findall(group), where)
    kind = sharding.kind
    if kind == "tuple":
        out.type = 2
        for element in sharding.elements:
            write_sharding(out.tuple_shardings.add(), element, where)
    elif kind == "maximal":
        out.type = 1
        out.tile_assignment_devices.append(sharding.device)
    elif kind in _SHARDING_TYPE:
        out.type = _SHARDING_TYPE[kind]
    else:
        out.type = 3
        tiles = sharding.tiles
        out.tile_assignment_dimensions.extend(tiles.dims)
        if tiles.iota_dims is not None:
            out.iota_reshape_dims.extend(tiles.iota_dims)
            out.iota_transpose_perm.extend(tiles.perm or range(len(tiles.iota_dims)))
        else:
            out.tile_assignment_devices.extend(tiles.devices)
        out.replicate_on_last_tile_dim = sharding.last_tile_dim_replicate
        out.last_tile_dims.extend(_SHARDING_TYPE[t] for t in sharding.subgroup_types)
