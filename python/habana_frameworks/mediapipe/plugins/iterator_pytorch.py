"""PyTorch iterators over a MediaPipe's output; they need a built pipe (see MediaPipe)."""
from __future__ import annotations

from typing import Any

from .._unavailable import unavailable


class _PipeIterator:
    def __init__(self, mediapipe: Any = None, *args: Any, **kwargs: Any) -> None:
        raise unavailable(type(self).__name__)


class HPUGenericPytorchIterator(_PipeIterator):
    pass


class HPUResnetPytorchIterator(_PipeIterator):
    pass


class HPUSsdPytorchIterator(_PipeIterator):
    pass
