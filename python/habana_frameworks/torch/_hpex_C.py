"""habana_frameworks.torch._hpex_C: the bridge's legacy pybind entry points for the hpex
EmbeddingBag helpers (DLRM), on the Go embedding-bag kernel (_ops/hpex_embedding_bag.py)."""
from habana_frameworks.torch._ops.hpex_embedding_bag import (embedding_bag_preproc, embedding_bag_sum_bwd,
                                                             embedding_bag_sum_fwd)

__all__ = ["embedding_bag_preproc", "embedding_bag_sum_bwd", "embedding_bag_sum_fwd"]
