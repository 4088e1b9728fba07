"""ImageNet-style datasets the media loader recognises."""
from __future__ import annotations

import os
from typing import Any, Callable

try:
    from torchvision.datasets import ImageFolder
    from torchvision.datasets.folder import default_loader
except ImportError:  # torchvision is optional; without it there is no image dataset
    ImageFolder = None

if ImageFolder is not None:
    class ImageFolderWithManifest(ImageFolder):
        """An ImageFolder whose file list comes from a manifest instead of a directory walk:
        one `relative/path.JPEG class_name` pair per line (paths relative to `root`)."""

        def __init__(self, root: str, transform: Callable | None = None,
                     target_transform: Callable | None = None, loader: Callable = default_loader,
                     is_valid_file: Callable | None = None, manifest: str | None = None,
                     **kwargs: Any) -> None:
            self._manifest = manifest
            super().__init__(root, transform=transform, target_transform=target_transform,
                             loader=loader, is_valid_file=is_valid_file, **kwargs)

        def find_classes(self, directory: str):
            if self._manifest is None:
                return super().find_classes(directory)
            classes = sorted({cls for _, cls in self._manifest_entries()})
            return classes, {c: i for i, c in enumerate(classes)}

        def make_dataset(self, directory, class_to_idx=None, extensions=None,
                         is_valid_file=None, allow_empty=False):
            if self._manifest is None:
                return super().make_dataset(directory, class_to_idx, extensions, is_valid_file,
                                            allow_empty)
            return [(os.path.join(directory, path), class_to_idx[cls])
                    for path, cls in self._manifest_entries()]

        def _manifest_entries(self) -> list[tuple[str, str]]:
            entries = []
            with open(self._manifest, encoding="utf-8") as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2:
                        entries.append((parts[0], parts[1]))
            return entries
