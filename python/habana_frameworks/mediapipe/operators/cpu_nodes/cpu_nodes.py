"""`media_function`: base class of the Python callbacks a MediaPipe runs on the host."""
from __future__ import annotations

from typing import Any


class media_function:
    """Holds the node's parameters (shape, dtype, seed, ...) as the pipe passes them;
    subclasses implement __call__."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = dict(params)

    def __call__(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")
