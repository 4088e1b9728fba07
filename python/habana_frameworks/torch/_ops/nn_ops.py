"""Neural-network ops (convolution, pooling, normalization, embedding, indexing, optimizers) lowered to Go."""
from __future__ import annotations
