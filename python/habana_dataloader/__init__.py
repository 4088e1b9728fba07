"""`habana_dataloader.HabanaDataLoader`, as the habana_media_loader package behaves off Gaudi.

On Gaudi the loader decodes ImageNet/COCO on the device's media engine (MediaPipe) or with the
aeon library. hpusim has neither, and its device type is not one the media paths accept, so
every dataset takes the real package's fallback: it prints why, then is a plain
`torch.utils.data.DataLoader` built from the same arguments. DATALOADER_FALLBACK_EN (on by
default) turns the fallback off: then the failure is printed and raised, as in the package.
"""
from __future__ import annotations

import os
from typing import Any

import torch.utils.data

__all__ = ["HabanaDataLoader"]


def _device_type_name() -> str:
    try:
        from habana_frameworks.torch.utils import experimental as htexp
        return str(htexp._get_device_type())
    except Exception as e:  # no device at all: the loader still falls back
        return f"unavailable ({e})"


def _is_image_folder(dataset: Any) -> bool:
    try:
        import torchvision
    except ImportError:
        return False
    return isinstance(dataset, torchvision.datasets.ImageFolder)


def _is_coco(dataset: Any) -> bool:
    try:
        return "COCO 2017 Dataset" in dataset.data["info"]["description"]
    except Exception:
        return False


def _media_loader(dataset: Any):
    """The hardware-accelerated loaders need Gaudi's media decoder (Gaudi2/3 MediaPipe) or
    the aeon library; neither exists on the emulated device."""
    if _is_image_folder(dataset) or _is_coco(dataset):
        print(f"HabanaDataLoader device type {_device_type_name()}")
        raise ValueError("Unsupported device")
    raise TypeError("'NoneType' object is not callable")


class HabanaDataLoader:
    """Same arguments as torch.utils.data.DataLoader; iterates like it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        dataset = kwargs.get("dataset", args[0] if args else None)
        try:
            self.dataloader = _media_loader(dataset)
        except Exception as e:
            if not os.environ.get("DATALOADER_FALLBACK_EN", True):
                print(f"Habana dataloader configuration failed: {e}")
                raise
            print(f"Failed to initialize Habana Dataloader, error: {e}\nRunning with PyTorch Dataloader")
            self.dataloader = torch.utils.data.DataLoader(*args, **kwargs)
        self._iterator = None

    def __iter__(self):
        self._iterator = iter(self.dataloader)
        return self

    def __next__(self):
        if self._iterator is None:
            self._iterator = iter(self.dataloader)
        return next(self._iterator)

    def __len__(self) -> int:
        return len(self.dataloader)

    def __getattr__(self, name: str) -> Any:
        # dataset, batch_size, sampler, ... as on the DataLoader it holds.
        if name == "dataloader":
            raise AttributeError(name)
        return getattr(self.dataloader, name)


from . import habana_dataset  # noqa: E402,F401
