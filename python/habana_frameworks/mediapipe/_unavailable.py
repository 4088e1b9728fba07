from __future__ import annotations


class MediaPipeUnavailable(RuntimeError):
    """The Gaudi media decoder that MediaPipe runs on is not part of hpusim's emulation."""


def unavailable(what: str) -> MediaPipeUnavailable:
    return MediaPipeUnavailable(
        f"{what}: MediaPipe runs on the Gaudi2/Gaudi3 hardware media decoder, which hpusim "
        "does not emulate; use torch.utils.data.DataLoader (habana_dataloader falls back to it)")
