"""The one opcode table: every HLO opcode with its text name, arity and category.

Other modules (shape inference, the interpreter, elemental emission) key their registries by the
text name used here, e.g. `"exponential"`, `"count-leading-zeros"`.

    >>> OPCODES["add"].arity, OPCODES["add"].category
    (2, 'elementwise_binary')

`can_infer_shape` follows XLA's parser (`CanInferShape` in hlo_parser.cc): only those opcodes may
omit the result shape in text; the rest must write it.
"""

from __future__ import annotations

from dataclasses import dataclass

VARIADIC = None


@dataclass(frozen=True)
class Opcode:
    name: str  # text name in HLO
    enum: str  # XLA's HloOpcode enumerator, e.g. "kExp"
    arity: int | None  # None = variadic
    category: str
    can_infer_shape: bool = False  # the text may omit the result shape (XLA's CanInferShape)

    @property
    def is_elementwise(self) -> bool:
        return self.category.startswith("elementwise")


_UNARY = [
    ("abs", "kAbs"), ("acos", "kAcos"), ("acosh", "kAcosh"), ("asin", "kAsin"), ("asinh", "kAsinh"),
    ("atanh", "kAtanh"), ("cbrt", "kCbrt"), ("ceil", "kCeil"), ("count-leading-zeros", "kClz"),
    ("convert", "kConvert"), ("bitcast-convert", "kBitcastConvert"), ("copy", "kCopy"),
    ("cosine", "kCos"), ("cosh", "kCosh"), ("erf", "kErf"), ("exponential", "kExp"),
    ("exponential-minus-one", "kExpm1"), ("floor", "kFloor"), ("imag", "kImag"),
    ("is-finite", "kIsFinite"), ("log", "kLog"), ("log-plus-one", "kLog1p"), ("logistic", "kLogistic"),
    ("not", "kNot"), ("negate", "kNegate"), ("popcnt", "kPopulationCount"), ("real", "kReal"),
    ("reduce-precision", "kReducePrecision"), ("round-nearest-afz", "kRoundNearestAfz"),
    ("round-nearest-even", "kRoundNearestEven"), ("rsqrt", "kRsqrt"), ("sign", "kSign"),
    ("sine", "kSin"), ("sinh", "kSinh"), ("sqrt", "kSqrt"), ("tan", "kTan"), ("tanh", "kTanh"),
]
_BINARY = [
    ("add", "kAdd"), ("atan2", "kAtan2"), ("compare", "kCompare"), ("complex", "kComplex"),
    ("divide", "kDivide"), ("maximum", "kMaximum"), ("minimum", "kMinimum"), ("multiply", "kMultiply"),
    ("mulhi", "kMulHi"), ("power", "kPower"), ("remainder", "kRemainder"), ("subtract", "kSubtract"),
    ("and", "kAnd"), ("or", "kOr"), ("xor", "kXor"), ("shift-left", "kShiftLeft"),
    ("shift-right-arithmetic", "kShiftRightArithmetic"), ("shift-right-logical", "kShiftRightLogical"),
    ("stochastic-convert", "kStochasticConvert"),
]
_TERNARY = [("select", "kSelect"), ("clamp", "kClamp")]

_OTHER = [
    # data movement / shape
    ("parameter", "kParameter", 0, "data"), ("constant", "kConstant", 0, "data"),
    ("iota", "kIota", 0, "data"), ("broadcast", "kBroadcast", 1, "data"),
    ("reshape", "kReshape", 1, "data"), ("dynamic-reshape", "kDynamicReshape", VARIADIC, "data"),
    ("bitcast", "kBitcast", 1, "data"), ("transpose", "kTranspose", 1, "data"),
    ("reverse", "kReverse", 1, "data"), ("slice", "kSlice", 1, "data"),
    ("dynamic-slice", "kDynamicSlice", VARIADIC, "data"),
    ("dynamic-update-slice", "kDynamicUpdateSlice", VARIADIC, "data"),
    ("concatenate", "kConcatenate", VARIADIC, "data"), ("pad", "kPad", 2, "data"),
    ("gather", "kGather", 2, "data"), ("scatter", "kScatter", VARIADIC, "data"),
    ("tuple", "kTuple", VARIADIC, "data"), ("get-tuple-element", "kGetTupleElement", 1, "data"),
    ("get-dimension-size", "kGetDimensionSize", 1, "data"),
    ("set-dimension-size", "kSetDimensionSize", 2, "data"),
    ("copy-start", "kCopyStart", 1, "data"), ("copy-done", "kCopyDone", 1, "data"),
    # reductions / windows / sorting
    ("reduce", "kReduce", VARIADIC, "reduction"), ("reduce-window", "kReduceWindow", VARIADIC, "reduction"),
    ("select-and-scatter", "kSelectAndScatter", 3, "reduction"), ("scan", "kScan", VARIADIC, "reduction"),
    ("sort", "kSort", VARIADIC, "reduction"), ("topk", "kTopK", 1, "reduction"),
    ("map", "kMap", VARIADIC, "reduction"),
    # linear algebra / dnn
    ("dot", "kDot", 2, "linalg"), ("ragged-dot", "kRaggedDot", 3, "linalg"),
    ("scaled-dot", "kScaledDot", 4, "linalg"), ("convolution", "kConvolution", 2, "linalg"),
    ("fft", "kFft", 1, "linalg"), ("cholesky", "kCholesky", 1, "linalg"),
    ("triangular-solve", "kTriangularSolve", 2, "linalg"),
    ("batch-norm-training", "kBatchNormTraining", 3, "linalg"),
    ("batch-norm-inference", "kBatchNormInference", 5, "linalg"),
    ("batch-norm-grad", "kBatchNormGrad", 5, "linalg"),
    # rng
    ("rng", "kRng", VARIADIC, "rng"), ("rng-bit-generator", "kRngBitGenerator", 1, "rng"),
    ("rng-get-and-update-state", "kRngGetAndUpdateState", 0, "rng"),
    # control flow
    ("call", "kCall", VARIADIC, "control"), ("conditional", "kConditional", VARIADIC, "control"),
    ("while", "kWhile", 1, "control"), ("fusion", "kFusion", VARIADIC, "control"),
    ("custom-call", "kCustomCall", VARIADIC, "control"), ("async-start", "kAsyncStart", VARIADIC, "control"),
    ("async-update", "kAsyncUpdate", 1, "control"), ("async-done", "kAsyncDone", 1, "control"),
    ("after-all", "kAfterAll", VARIADIC, "control"), ("add-dependency", "kAddDependency", 2, "control"),
    ("opt-barrier", "kOptimizationBarrier", 1, "control"), ("domain", "kDomain", 1, "control"),
    # collectives
    ("all-gather", "kAllGather", VARIADIC, "collective"),
    ("all-gather-start", "kAllGatherStart", VARIADIC, "collective"),
    ("all-gather-done", "kAllGatherDone", 1, "collective"),
    ("all-reduce", "kAllReduce", VARIADIC, "collective"),
    ("all-reduce-start", "kAllReduceStart", VARIADIC, "collective"),
    ("all-reduce-done", "kAllReduceDone", 1, "collective"),
    ("all-to-all", "kAllToAll", VARIADIC, "collective"),
    ("ragged-all-to-all", "kRaggedAllToAll", 6, "collective"),
    ("collective-broadcast", "kCollectiveBroadcast", VARIADIC, "collective"),
    ("collective-permute", "kCollectivePermute", VARIADIC, "collective"),
    ("collective-permute-start", "kCollectivePermuteStart", VARIADIC, "collective"),
    ("collective-permute-done", "kCollectivePermuteDone", 1, "collective"),
    ("reduce-scatter", "kReduceScatter", VARIADIC, "collective"),
    ("replica-id", "kReplicaId", 0, "collective"), ("partition-id", "kPartitionId", 0, "collective"),
    ("send", "kSend", 2, "collective"), ("send-done", "kSendDone", 1, "collective"),
    ("recv", "kRecv", 1, "collective"), ("recv-done", "kRecvDone", 1, "collective"),
    # host io
    ("infeed", "kInfeed", 1, "io"), ("outfeed", "kOutfeed", 2, "io"),
]

# Opcodes whose result shape may be left out of the text (XLA's CanInferShape). Convert,
# bitcast-convert, reduce-precision and stochastic-convert are elementwise but not in it.
_INFERABLE = frozenset(
    {n for n, _ in _UNARY + _BINARY + _TERNARY}
    - {"convert", "bitcast-convert", "reduce-precision", "stochastic-convert"}
) | {
    "add-dependency", "after-all", "batch-norm-grad", "batch-norm-inference", "batch-norm-training",
    "broadcast", "call", "cholesky", "concatenate", "conditional", "convolution", "opt-barrier",
    "domain", "dot", "fft", "gather", "get-dimension-size", "set-dimension-size", "get-tuple-element",
    "map", "pad", "partition-id", "ragged-dot", "reduce", "replica-id", "reverse", "scan",
    "scaled-dot", "scatter", "reduce-window", "select-and-scatter", "sort", "transpose",
    "triangular-solve", "tuple", "while", "topk",
}

OPCODES: dict[str, Opcode] = {}
for _n, _e in _UNARY:
    OPCODES[_n] = Opcode(_n, _e, 1, "elementwise_unary", _n in _INFERABLE)
for _n, _e in _BINARY:
    OPCODES[_n] = Opcode(_n, _e, 2, "elementwise_binary", _n in _INFERABLE)
for _n, _e in _TERNARY:
    OPCODES[_n] = Opcode(_n, _e, 3, "elementwise_ternary", _n in _INFERABLE)
for _n, _e, _a, _c in _OTHER:
    OPCODES[_n] = Opcode(_n, _e, _a, _c, _n in _INFERABLE)

COMMUTATIVE = frozenset({"add", "multiply", "mulhi", "maximum", "minimum", "and", "or", "xor"})

# Ops with side effects that passes must never remove or duplicate.
SIDE_EFFECTING = frozenset({
    "send", "send-done", "recv", "recv-done", "infeed", "outfeed", "rng", "rng-get-and-update-state",
    "all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "all-to-all", "collective-permute",
    "collective-permute-start", "reduce-scatter", "collective-broadcast", "ragged-all-to-all",
})

# Async sugar `<op>-start` / `-update` / `-done` that parses to async-start/update/done wrapping <op>,
# for ops without real start/done opcodes.
ASYNC_REAL_START_DONE = frozenset({"all-gather", "all-reduce", "collective-permute", "copy", "send", "recv"})


def is_elementwise(opcode: str) -> bool:
    op = OPCODES.get(opcode)
    return op is not None and op.is_elementwise
