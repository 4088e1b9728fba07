"""habana_frameworks.torch.hpex.kernels: FusedSDPA, the rotary position embedding helpers,
CTCLoss and CustomSoftmax, on native kernels."""
from .CTCLoss import CTCLoss
from .CustomSoftmax import CustomSoftmax
from .FusedSDPA import FusedSDPA
from . import BlockSoftmax, Int4Ops, MixtureOfExperts  # noqa: F401  (vLLM's torch.ops.hpu ops)
from . import SoftmaxFa2  # noqa: F401  (vLLM's unified attention: torch.ops.hpu.softmax_fa2)
from . import Fp8SDPA  # noqa: F401  (torch.ops.hpu.fp8_sdpa_recomp_fwd*)
from .Fp8FusedSDPA import fp8_fused_sdpa  # noqa: F401
from . import Fp8Softmax  # noqa: F401  (optimum-habana's softmax_fp8, cast_to_fp8_just_in_time)
from .RotaryPosEmbeddingHelper import (RotaryPosEmbeddingHelperV1, RotaryPosEmbeddingHelperV2,
                                       RotaryPosEmbeddingHelperV3, RotaryPosEmbeddingMode, apply_rotary_pos_emb)

__all__ = ["CTCLoss", "CustomSoftmax", "FusedSDPA", "RotaryPosEmbeddingHelperV1", "RotaryPosEmbeddingHelperV2",
           "RotaryPosEmbeddingHelperV3",
           "RotaryPosEmbeddingMode", "apply_rotary_pos_emb"]
