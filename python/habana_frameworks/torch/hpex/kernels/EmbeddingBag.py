"""hpex EmbeddingBag: `forward` / `backward` are the bridge's `_hpex_C.embedding_bag_sum_fwd`
and `_hpex_C.embedding_bag_sum_bwd` (bag sums for DLRM, on the Go kernel)."""
from habana_frameworks.torch._hpex_C import embedding_bag_sum_bwd as backward  # noqa: F401
from habana_frameworks.torch._hpex_C import embedding_bag_sum_fwd as forward  # noqa: F401
