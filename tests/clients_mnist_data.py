"""MNIST made locally, in the files and folder layout torchvision's `datasets.MNIST` reads
(`<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte`), so client scripts that call
`datasets.MNIST(root, download=True)` find the data present and download nothing.

The images are not digits: each class is a fixed random blob pattern plus per-image noise and
a small shift, which a small CNN or MLP learns within a few steps (the tests check learning,
not MNIST accuracy)."""
import os
import struct

import numpy as np

FILES = {
    True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _templates(rng: np.random.Generator) -> np.ndarray:
    # Smooth per-class patterns: random coarse 7x7 grids upsampled to 28x28.
    coarse = rng.random((10, 7, 7)) > 0.6
    return np.kron(coarse, np.ones((4, 4))).astype(np.float32)


def make_split(n: int, seed: int) -> tuple:
    templates = _templates(np.random.default_rng(1234))
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 10).astype(np.uint8)
    rng.shuffle(labels)
    images = np.empty((n, 28, 28), dtype=np.uint8)
    for i, c in enumerate(labels):
        img = np.roll(templates[c], tuple(rng.integers(-1, 2, size=2)), axis=(0, 1))
        img = img * 200.0 + rng.normal(0.0, 30.0, size=(28, 28))
        images[i] = np.clip(img, 0, 255).astype(np.uint8)
    return images, labels


def _write_idx(path: str, array: np.ndarray) -> None:
    # IDX format: magic (0, 0, dtype 0x08 = ubyte, ndim), big-endian dims, then the bytes.
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 0x08, array.ndim))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(np.ascontiguousarray(array).tobytes())


def write_mnist(root: str, n_train: int = 512, n_test: int = 256) -> str:
    """Write both splits under `root/MNIST/raw`; returns `root`."""
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for train, n, seed in ((True, n_train, 1), (False, n_test, 2)):
        images, labels = make_split(n, seed)
        img_name, lbl_name = FILES[train]
        _write_idx(os.path.join(raw, img_name), images)
        _write_idx(os.path.join(raw, lbl_name), labels)
    return root


if __name__ == "__main__":
    import sys

    print(write_mnist(sys.argv[1], *(int(a) for a in sys.argv[2:])))
