"""CIFAR-shaped synthetic data: 32 x 32 RGB images (uint8) and 10 labels,
made from a seed in memory, and the augmentation a new user copies from a
CIFAR tutorial: random crop with 4 pixels of padding and a horizontal flip,
done with PIL on every sample in `__getitem__` (the CPU work a loader does).

The images are noise with a class-dependent mean colour, so a model can learn
something; nothing here depends on what it learns.
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from PIL import Image, ImageOps
from torch.utils.data import Dataset

SIZE, PAD, CLASSES = 32, 4, 10


def make_arrays(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`n` images (n, 32, 32, 3) uint8 and their labels (n,) int64, from `seed`."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, n)
    colours = rng.integers(40, 216, (CLASSES, 3))
    noise = rng.normal(0, 40, (n, SIZE, SIZE, 3))
    images = np.clip(colours[labels][:, None, None, :] + noise, 0, 255).astype(np.uint8)
    return images, labels.astype(np.int64)


class SyntheticCIFAR(Dataset):
    """`n` samples; `augment=True` crops and flips each one with PIL (training),
    `False` only converts it (the test set)."""

    def __init__(self, n: int, seed: int = 0, augment: bool = True):
        self.images, self.labels = make_arrays(n, seed)
        self.augment = augment

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = Image.fromarray(self.images[i])
        if self.augment:
            img = random_crop_flip(img)
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
        return (x - 0.5) / 0.25, int(self.labels[i])


def random_crop_flip(img: Image.Image) -> Image.Image:
    """torchvision's RandomCrop(32, padding=4) + RandomHorizontalFlip, in PIL.
    Python's `random`: each loader worker reseeds it (DataLoader does), the main process does not."""
    padded = ImageOps.expand(img, border=PAD, fill=0)
    x, y = random.randint(0, 2 * PAD), random.randint(0, 2 * PAD)
    img = padded.crop((x, y, x + SIZE, y + SIZE))
    return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if random.random() < 0.5 else img
