"""hpex EmbeddingBagPreproc: `forward` is the bridge's host-side coalescing helper
`_hpex_C.embedding_bag_preproc(indices, offsets, embeddingTableLen)`."""
from habana_frameworks.torch._hpex_C import embedding_bag_preproc as forward  # noqa: F401
