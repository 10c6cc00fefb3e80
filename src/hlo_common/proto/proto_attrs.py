"""The attributes of one HloInstructionProto as HLO text (`dimensions={0}`, `window={...}`, ...),
in the spelling of XLA's printer (xla/hlo/ir/hlo_instructions.cc, ExtraAttributesToStringImpl);
`proto_to_hlo` joins them into the instruction's line."""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.strings import lexes_as_json_dict, quote_string
from hlo_common.proto import proto_tables as T
from hlo_common.proto.original_value import origin_text
from hlo_common.proto.proto_values import (ProtoError, literal_from_proto, metadata_text, primitive, shape_text,
                                           sharding_text)

_ALWAYS_DIMS, _NO_DIMS = T.ALWAYS_DIMS, T.NO_DIMS
_PRECISION, _ALGORITHM, _API, _SCHEDULE = T.PRECISION, T.ALGORITHM, T.API_VERSION, T.CUSTOM_CALL_SCHEDULE
_FFT, _TRANSPOSE, _DISTRIBUTION, _RNG_ALGORITHM = T.FFT_TYPE, T.TRANSPOSE, T.DISTRIBUTION, T.RNG_ALGORITHM
_PRED = T.PRED_ID


def _ints(values) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def instruction_attrs(p, called: list[str], operand_types: list[int], where: str) -> list[str]:
    """Every attribute line piece of instruction proto `p`; `called` are its callees' names,
    `operand_types` its operands' element types (PrimitiveType numbers)."""
    out: list[str] = []
    op = p.opcode
    out += _called_attrs(p, op, called, operand_types)
    if p.dimensions and op not in _NO_DIMS or op in _ALWAYS_DIMS:
        out.append("dimensions=" + _ints(p.dimensions))
    if op == "iota":
        out.append(f"iota_dimension={p.dimensions[0] if p.dimensions else 0}")
    if op == "get-tuple-element":
        out.append(f"index={p.tuple_index}")
    out += _shape_op_attrs(p, op)
    out += _dot_conv_attrs(p, op)
    out += _gather_scatter_attrs(p)
    out += _misc_attrs(p, op, operand_types)
    out += _collective_attrs(p, op, where)
    out += _custom_call_attrs(p, op, where)
    out += _common_attrs(p)
    return out


def _called_attrs(p, op: str, called: list[str], operand_types: list[int]) -> list[str]:
    if not called:
        return []
    if op == "fusion":
        return [f"kind={p.fusion_kind}", f"calls={called[0]}"]
    if op == "while":
        return [f"condition={called[1]}", f"body={called[0]}"]
    if op == "select-and-scatter":
        return [f"select={called[0]}", f"scatter={called[1]}"]
    if op == "conditional":
        if len(called) == 2 and operand_types and operand_types[0] == _PRED:
            return [f"true_computation={called[0]}", f"false_computation={called[1]}"]
        return ["branch_computations={" + ", ".join(called) + "}"]
    if op in ("async-start", "async-update", "async-done"):
        return [f"calls={called[0]}"]
    if op == "custom-call":
        return ["called_computations={" + ", ".join(called) + "}"]
    return [f"to_apply={called[0]}"]


def _shape_op_attrs(p, op: str) -> list[str]:
    out = []
    if p.slice_dimensions:
        parts = []
        for s in p.slice_dimensions:
            parts.append(f"[{s.start}:{s.limit}" + (f":{s.stride}" if s.stride != 1 else "") + "]")
        out.append("slice={" + ", ".join(parts) + "}")
    if p.dynamic_slice_sizes:
        out.append("dynamic_slice_sizes=" + _ints(p.dynamic_slice_sizes))
    if p.HasField("padding_config"):
        dims = [f"{d.edge_padding_low}_{d.edge_padding_high}" +
                (f"_{d.interior_padding}" if d.interior_padding else "") for d in p.padding_config.dimensions]
        out.append("padding=" + ("x".join(dims) if dims else "{}"))
    if p.HasField("window") and p.window.dimensions:
        out.append("window=" + _window(p.window))
    return out


def _window(w) -> str:
    dims = list(w.dimensions)

    def field(name, values, default):
        return f" {name}=" + "x".join(values) if any(v != default for v in values) else ""
    text = "size=" + "x".join(str(d.size) for d in dims)
    text += field("stride", [str(d.stride) for d in dims], "1")
    text += field("pad", [f"{d.padding_low}_{d.padding_high}" for d in dims], "0_0")
    text += field("lhs_dilate", [str(d.base_dilation) for d in dims], "1")
    text += field("rhs_dilate", [str(d.window_dilation) for d in dims], "1")
    text += field("rhs_reversal", ["1" if d.window_reversal else "0" for d in dims], "0")
    return "{" + text + "}"


def _dim_labels(c) -> str:
    def labels(batch, feature, spatial, b, f):
        n = 2 + len(spatial)
        chars = ["?"] * n
        chars[batch], chars[feature] = b, f
        for k, d in enumerate(spatial):
            chars[d] = str(k)
        return "".join(chars)
    lhs = labels(c.input_batch_dimension, c.input_feature_dimension, c.input_spatial_dimensions, "b", "f")
    rhs = labels(c.kernel_input_feature_dimension, c.kernel_output_feature_dimension,
                 c.kernel_spatial_dimensions, "i", "o")
    out = labels(c.output_batch_dimension, c.output_feature_dimension, c.output_spatial_dimensions, "b", "f")
    return f"{lhs}_{rhs}->{out}"


def _dot_conv_attrs(p, op: str) -> list[str]:
    out = []
    if p.HasField("convolution_dimension_numbers"):
        out.append("dim_labels=" + _dim_labels(p.convolution_dimension_numbers))
    if p.feature_group_count > 1:
        out.append(f"feature_group_count={p.feature_group_count}")
    if p.batch_group_count > 1:
        out.append(f"batch_group_count={p.batch_group_count}")
    ragged = p.ragged_dot_dimension_numbers if p.HasField("ragged_dot_dimension_numbers") else None
    if p.HasField("dot_dimension_numbers") or ragged is not None:
        d = ragged.dot_dimension_numbers if ragged is not None else p.dot_dimension_numbers
        out += [f"lhs_batch_dims={_ints(d.lhs_batch_dimensions)}"] if d.lhs_batch_dimensions else []
        out.append(f"lhs_contracting_dims={_ints(d.lhs_contracting_dimensions)}")
        out += [f"rhs_batch_dims={_ints(d.rhs_batch_dimensions)}"] if d.rhs_batch_dimensions else []
        out.append(f"rhs_contracting_dims={_ints(d.rhs_contracting_dimensions)}")
        if ragged is not None:
            out.append(f"lhs_ragged_dims={_ints(ragged.lhs_ragged_dimensions)}")
            if ragged.rhs_group_dimensions:
                out.append(f"rhs_group_dims={_ints(ragged.rhs_group_dimensions)}")
    pc = p.precision_config
    if any(pc.operand_precision):
        words = ",".join(_PRECISION[v].lower() for v in pc.operand_precision)
        out.append("operand_precision={" + words + "}")
    if pc.algorithm:
        out.append("algorithm=" + _ALGORITHM[pc.algorithm].lower().removeprefix("alg_"))
    return out


def _gather_scatter_attrs(p) -> list[str]:
    out = []
    if p.HasField("gather_dimension_numbers"):
        g = p.gather_dimension_numbers
        out += [f"offset_dims={_ints(g.offset_dims)}",
                f"collapsed_slice_dims={_ints(g.collapsed_slice_dims)}",
                f"start_index_map={_ints(g.start_index_map)}"]
        if g.operand_batching_dims:
            out += [f"operand_batching_dims={_ints(g.operand_batching_dims)}",
                    f"start_indices_batching_dims={_ints(g.start_indices_batching_dims)}"]
        out += [f"index_vector_dim={g.index_vector_dim}", f"slice_sizes={_ints(p.gather_slice_sizes)}"]
    if p.HasField("scatter_dimension_numbers"):
        s = p.scatter_dimension_numbers
        out += [f"update_window_dims={_ints(s.update_window_dims)}",
                f"inserted_window_dims={_ints(s.inserted_window_dims)}",
                f"scatter_dims_to_operand_dims={_ints(s.scatter_dims_to_operand_dims)}"]
        if s.input_batching_dims:
            out += [f"input_batching_dims={_ints(s.input_batching_dims)}",
                    f"scatter_indices_batching_dims={_ints(s.scatter_indices_batching_dims)}"]
        out.append(f"index_vector_dim={s.index_vector_dim}")
    if p.indices_are_sorted:
        out.append("indices_are_sorted=true")
    if p.unique_indices:
        out.append("unique_indices=true")
    return out


def _misc_attrs(p, op: str, operand_types: list[int]) -> list[str]:
    out = []
    if p.comparison_direction:
        out.append(f"direction={p.comparison_direction}")
        first = operand_types[0] if operand_types else None
        if p.comparison_type and p.comparison_type != T.default_comparison(first):
            out.append(f"type={p.comparison_type}")
    if op in ("sort", "topk") and p.is_stable:
        out.append("is_stable=true")
    if op == "topk":
        out += [f"k={p.k}", f"largest={_bool(p.largest)}"]
    if op == "reduce-precision":
        out += [f"exponent_bits={p.exponent_bits}", f"mantissa_bits={p.mantissa_bits}"]
    if op == "rng":
        out.append("distribution=" + _DISTRIBUTION.get(p.distribution, "rng_invalid"))
    if op == "rng-bit-generator":
        out.append("algorithm=" + _RNG_ALGORITHM.get(p.rng_algorithm, "rng_default"))
    if op == "fft":
        out += ["fft_type=" + _FFT[p.fft_type], f"fft_length={_ints(p.fft_length)}"]
    if op.startswith("batch-norm"):
        out += [f"epsilon={np.float32(p.epsilon)!s}", f"feature_index={p.feature_index}"]
    if op == "triangular-solve":
        t = p.triangular_solve_options
        out += [f"{k}=true" for k in ("left_side", "lower", "unit_diagonal") if getattr(t, k)]
        out.append("transpose_a=" + _TRANSPOSE[t.transpose_a])
    if op == "cholesky" and p.cholesky_options.lower:
        out.append("lower=true")
    if op == "scan":
        out.append(f"num_carries={p.scan_num_carries}")
        if p.scan_is_reverse:
            out.append("is_reverse=true")
        if p.scan_is_associative in T.SCAN_ASSOCIATIVE:
            out.append("is_associative=" + T.SCAN_ASSOCIATIVE[p.scan_is_associative])
    if op == "domain":
        out.append(_domain_text(p))
    if op == "rng-get-and-update-state":
        out.append(f"delta={p.delta}")
    if p.WhichOneof("optional_cross_program_prefetch_index"):
        out.append(f"cross_program_prefetch_index={p.cross_program_prefetch_index}")
    if op in ("infeed",) and p.infeed_config:
        out.append("infeed_config=" + quote_string(p.infeed_config.decode("utf-8", "replace")))
    if op == "outfeed" and p.outfeed_config:
        out.append("outfeed_config=" + quote_string(p.outfeed_config.decode("utf-8", "replace")))
    if op == "outfeed" and p.HasField("outfeed_shape"):
        out.append("outfeed_shape=" + shape_text(p.outfeed_shape))
    if p.is_composite:
        out.append("is_composite=true")
    return out


def _collective_attrs(p, op: str, where: str) -> list[str]:
    out = []
    if p.channel_id > 0:
        out.append(f"channel_id={p.channel_id}")
    groups = p.collective_device_list
    iota = p.HasField("iota_collective_device_list") or groups.HasField("iota_replica_group_list")
    if p.HasField("mesh_axes_replica_group_list"):
        out.append("replica_groups=" + _mesh_text(p.mesh_axes_replica_group_list, where))
    elif iota:
        g = p.iota_collective_device_list if p.HasField("iota_collective_device_list") else \
            groups.iota_replica_group_list
        reshape = ",".join(map(str, g.iota_reshape_dims))
        text = f"[{g.num_replica_groups},{g.num_devices_per_group}]<=[{reshape}]"
        perm = list(g.iota_transpose_perm) or list(range(len(g.iota_reshape_dims)))
        if len(perm) > 1:  # XLA's IotaReplicaGroupList prints the permutation of every 2-D+ iota
            text += "T(" + ",".join(map(str, perm)) + ")"
        out.append("replica_groups=" + text)
    elif groups.replica_groups or p.replica_groups or _collective(op):
        rg = groups.replica_groups or p.replica_groups
        out.append("replica_groups={" + ",".join(_ints(g.replica_ids) for g in rg) + "}")
    if p.use_global_device_ids:
        out.append("use_global_device_ids=true")
    if p.source_target_pairs or op in ("collective-permute", "collective-permute-start"):
        out.append("source_target_pairs={" + ",".join(f"{{{s.source},{s.target}}}"
                                                        for s in p.source_target_pairs) + "}")
    if op in ("send", "recv", "send-done", "recv-done") and p.is_host_transfer:
        out.append("is_host_transfer=true")
    if p.constrain_layout and op != "custom-call":
        out.append("constrain_layout=true")
    return out


def _mesh_text(g, where: str) -> str:
    """`mesh['x'=4,'y'=2][, device_ids=(...)] {'x','y':(1)2}` (MeshAxesReplicaGroupList::ToString)."""
    axes = list(g.mesh.axes)
    text = "mesh[" + ",".join(f"'{a.name}'={a.size}" for a in axes) + "]"
    iota = g.mesh.iota_transform
    if g.mesh.device_ids:
        text += ", device_ids=(" + ",".join(map(str, g.mesh.device_ids)) + ")"
    elif g.mesh.HasField("iota_transform"):
        dims, perm = ",".join(map(str, iota.reshape_dims)), ",".join(map(str, iota.transpose_perm))
        text += f", device_ids=([{dims}]T({perm}))"
    refs = []
    for ref in g.axes:
        if not 0 <= ref.mesh_axis_index < len(axes):
            raise ProtoError(f"{where}: mesh_axes_replica_group_list: axis index {ref.mesh_axis_index} "
                             "names no mesh axis")
        sub = ref.sub_axis_info
        refs.append(f"'{axes[ref.mesh_axis_index].name}'" +
                    (f":({sub.pre_size}){sub.size}" if ref.HasField("sub_axis_info") else ""))
    return text + " {" + ",".join(refs) + "}"


def _domain_text(p) -> str:
    """XLA prints the user side (domain_exit_sharding) as `entry`, the operand side as `exit`, and
    a side the proto leaves out as `{}` (ShardingMetadata::ToString)."""
    user = sharding_text(p.domain_exit_sharding) if p.HasField("domain_exit_sharding") else "{}"
    operand = sharding_text(p.domain_entry_sharding) if p.HasField("domain_entry_sharding") else "{}"
    return f'domain={{kind="sharding", entry={user}, exit={operand}}}'


def _collective(op: str) -> bool:
    return op.split("-start")[0] in ("all-reduce", "all-gather", "all-to-all", "reduce-scatter",
                                     "ragged-all-to-all", "collective-broadcast")


def _custom_call_attrs(p, op: str, where: str) -> list[str]:
    if op != "custom-call":
        return []
    out = ["custom_call_target=" + quote_string(p.custom_call_target)]
    if p.custom_call_has_side_effect:
        out.append("custom_call_has_side_effect=true")
    if p.constrain_layout:
        out.append("operand_layout_constraints={" +
                   ", ".join(shape_text(s, where) for s in p.operand_shapes_with_layout) + "}")
    if p.output_operand_aliasing:
        pairs = [f"{_ints(a.output_shape_index)}: ({a.operand_index}, {_ints(a.operand_shape_index)})"
                 for a in p.output_operand_aliasing]
        out.append("output_to_operand_aliasing={" + ", ".join(pairs) + "}")
    if p.HasField("literal"):
        out.append("literal=" + _literal_text(p.literal, where))
    if p.custom_call_schedule:
        out.append("schedule=" + _SCHEDULE[p.custom_call_schedule])
    if p.custom_call_api_version not in (0, 1):
        out.append("api_version=" + _API[p.custom_call_api_version])
    return out


def _literal_text(lit, where: str) -> str:
    """A custom call's `literal=s32[] 1` (its shape, then the value, as LiteralAttr prints it)."""
    from hlo_common.hlo.literal import format_literal

    value = literal_from_proto(lit, f"{where}: literal")
    et = lit.shape.element_type
    ptype = None if et == T.TUPLE_ID else primitive(et, f"{where}: literal")
    return f"{shape_text(lit.shape, where)} {format_literal(value, ptype)}"


def _common_attrs(p) -> list[str]:
    out = []
    if p.output_operand_aliasing and p.opcode == "fusion":
        pairs = [f"{_ints(a.output_shape_index)}: ({a.operand_index}, {_ints(a.operand_shape_index)})"
                 for a in p.output_operand_aliasing]
        out.append("output_to_operand_aliasing={" + ", ".join(pairs) + "}")
    if p.async_execution_thread and p.async_execution_thread != "main":
        out.append("async_execution_thread=" + quote_string(p.async_execution_thread))
    if p.HasField("sharding"):
        out.append("sharding=" + sharding_text(p.sharding))
    if p.statistics_viz.statistics:
        stats = "".join(f",{s.stat_name}={_num(s.stat_val)}" for s in p.statistics_viz.statistics)
        out.append(f"statistics={{visualizing_index={p.statistics_viz.stat_index_to_visualize}{stats}}}")
    if p.HasField("original_value"):
        out.append("origin=" + origin_text(p.original_value))
    if p.parameter_replication.replicated_at_leaf_buffers:
        out.append("parameter_replication={" +
                   ",".join(_bool(b) for b in p.parameter_replication.replicated_at_leaf_buffers) + "}")
    if p.frontend_attributes.map:
        out.append("frontend_attributes=" + frontend_text(p.frontend_attributes))
    if p.HasField("metadata"):
        meta = metadata_text(p.metadata)
        if meta:
            out.append("metadata={" + meta + "}")
    if p.backend_config:
        out.append("backend_config=" + quote_string(p.backend_config.decode("utf-8", "replace")))
    if p.HasField("result_accuracy"):
        ra = p.result_accuracy
        if ra.WhichOneof("specs") == "mode" and ra.mode:
            out.append("result_accuracy={mode=highest}")
        elif ra.WhichOneof("specs") == "tolerance":
            t = ra.tolerance
            tolerance = f"atol={_num(t.atol)},rtol={_num(t.rtol)},ulps={t.ulps}"
            out.append(f"result_accuracy={{tolerance={{{tolerance}}}}}")
    return out


def frontend_text(fa) -> str:
    """`{k="v",...}`; a value that is a dict (Shardy's meshes) unquoted, as XLA prints it."""
    items = sorted(fa.map.items())
    return "{" + ",".join(f"{k}={v if lexes_as_json_dict(v) else quote_string(v)}" for k, v in items) + "}"


def _num(v: float) -> str:
    """A double as XLA's StrCat writes it: no trailing `.0`."""
    text = repr(v)
    return text.removesuffix(".0")

