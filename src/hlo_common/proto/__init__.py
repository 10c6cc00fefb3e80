"""XLA's protocol-buffer forms of HLO (HloModuleProto, HloSnapshot) and their conversion to and
from the project's IR; the schema is `xla_hlo.proto`, with XLA's field numbers."""
