"""habana_frameworks.torch.hpex.kernels: FusedSDPA and the rotary position embedding
helpers, on native kernels."""
from .FusedSDPA import FusedSDPA
from .RotaryPosEmbeddingHelper import (RotaryPosEmbeddingHelperV1, RotaryPosEmbeddingHelperV2,
                                       RotaryPosEmbeddingHelperV3, RotaryPosEmbeddingMode, apply_rotary_pos_emb)

__all__ = ["FusedSDPA", "RotaryPosEmbeddingHelperV1", "RotaryPosEmbeddingHelperV2", "RotaryPosEmbeddingHelperV3",
           "RotaryPosEmbeddingMode", "apply_rotary_pos_emb"]
