"""Case 1's dataset: `VQAFeatureDataset` reads one split of the stand-in that
`synthetic.make_vqa_dataset` writes (re-exported here with `tiny_dataset` and
`TINY_DATA`, so `from ddp_lessons.cases.case1.data import ...` finds all of them).
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from .synthetic import EOS, MASK, PAD, TINY_DATA, make_vqa_dataset, tiny_dataset

__all__ = ["VQAFeatureDataset", "make_vqa_dataset", "tiny_dataset", "TINY_DATA"]


class VQAFeatureDataset(Dataset):
    """One split of the dataset: `entries` (the questions) and decoded samples.

    `dataset[i]` returns a dict with 'image' (a list holding one 3xSxS float
    tensor), 'text_ids', 'text_labels', 'text_ids_mlm', 'text_labels_mlm',
    'text_masks' (long tensors of length max_text_len), 'vqa_labels' (float
    multi-hot over the answers), 'answer_types', 'phrase_type', 'qid'.
    Random crop, flip and MLM masking apply to the train split only (when
    `train_transform`), drawn from torch's RNG so DataLoader worker seeding
    governs them. Defined in notebook 03_case1_beyond.
    """

    def __init__(self, root, split: str, image_size: int | None = None, max_text_len: int = 32,
                 mlm_probability: float = 0.15, train_transform: bool = True):
        self.root = Path(root)
        manifest = json.loads((self.root / "manifest.json").read_text())
        self.entries = json.loads((self.root / f"{split}.json").read_text())
        self.label2ans = json.loads((self.root / "answers.json").read_text())
        self.split, self.max_text_len, self.mlm_probability = split, max_text_len, mlm_probability
        self.image_size = image_size or manifest["params"]["image_size"]
        self.vocab_size = manifest["vocab_size"]
        self.augment = train_transform and split == "train"

    @property
    def num_answers(self) -> int:
        return len(self.label2ans)

    def __len__(self) -> int:
        return len(self.entries)

    def _image(self, name: str) -> torch.Tensor:
        s = self.image_size
        with Image.open(self.root / "images" / name) as im:
            im = im.convert("RGB")      # as M3AE does: grey scans, 3-channel encoder
        # Train: resize a little larger and crop at random; test: resize only.
        im = im.resize((s + s // 8,) * 2 if self.augment else (s, s), Image.Resampling.BILINEAR)
        x = torch.from_numpy(np.array(im)).permute(2, 0, 1).float().div_(255)
        if self.augment:
            top, left = torch.randint(0, s // 8 + 1, (2,)).tolist()
            x = x[:, top:top + s, left:left + s]
            if torch.rand(()) < 0.5:
                x = x.flip(-1)
        return (x - 0.5) / 0.5

    def _mlm(self, ids: torch.Tensor, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        # BERT's recipe: of the picked tokens, 80% -> <mask>, 10% random, 10% kept.
        g = None if self.augment else torch.Generator().manual_seed(index)
        pick = (torch.rand(ids.shape, generator=g) < self.mlm_probability) & (ids > EOS)
        labels = torch.where(pick, ids, torch.full_like(ids, -100))
        roll = torch.rand(ids.shape, generator=g)
        rand_ids = torch.randint(EOS + 1, MASK, ids.shape, generator=g)
        out = torch.where(pick & (roll < 0.8), torch.full_like(ids, MASK), ids)
        return torch.where(pick & (roll >= 0.8) & (roll < 0.9), rand_ids, out), labels

    def __getitem__(self, index: int) -> dict:
        e = self.entries[index]
        q = e["question_ids"][:self.max_text_len]
        ids = torch.full((self.max_text_len,), PAD, dtype=torch.long)
        ids[:len(q)] = torch.tensor(q)
        masks = (ids != PAD).long()
        ids_mlm, labels_mlm = self._mlm(ids, index)
        vqa = torch.zeros(self.num_answers)
        vqa[e["labels"]] = torch.tensor(e["scores"])
        return {"image": [self._image(e["image_name"])], "text_ids": ids,
                "text_labels": torch.full_like(ids, -100), "text_ids_mlm": ids_mlm,
                "text_labels_mlm": labels_mlm, "text_masks": masks, "vqa_labels": vqa,
                "answer_types": e["answer_type"], "phrase_type": e["phrase_type"],
                "qid": e["qid"]}

    def collote(self, batch: list[dict]) -> dict:
        """Collate samples into the batch the post's loop reads.

        Returns 'image' as a list with one BxCxSxS tensor, the text fields as
        BxL tensors, 'vqa_labels' as a list of per-sample tensors (the post
        indexes `batch['vqa_labels'][l]`), and lists of strings / ints for
        'answer_types', 'phrase_type', 'qid'. Defined in notebook 01_case1_broken.
        """
        out = {"image": [torch.stack([b["image"][0] for b in batch])]}
        for k in ("text_ids", "text_labels", "text_ids_mlm", "text_labels_mlm", "text_masks"):
            out[k] = torch.stack([b[k] for b in batch])
        for k in ("vqa_labels", "answer_types", "phrase_type", "qid"):
            out[k] = [b[k] for b in batch]
        return out
