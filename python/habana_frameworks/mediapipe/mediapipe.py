"""`MediaPipe`: the base class clients subclass to describe a media graph."""
from __future__ import annotations

from typing import Any

from ._unavailable import unavailable


class MediaPipe:
    """Constructing a pipe raises MediaPipeUnavailable: its graph would run on the media
    engine. Subclassing (at import time) works."""

    def __init__(self, device: Any = None, prefetch_depth: int = 2, batch_size: int = 1,
                 num_threads: int = 1, pipe_name: str | None = None, **kwargs: Any) -> None:
        raise unavailable(f"MediaPipe({pipe_name or type(self).__name__})")
