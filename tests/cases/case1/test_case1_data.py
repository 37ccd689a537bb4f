"""The VQA-RAD-shaped stand-in: deterministic on disk, the batch the post's loop reads."""

import hashlib
import json

import pytest
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from ddp_lessons.cases.case1.data import VQAFeatureDataset, make_vqa_dataset

TINY = dict(n_images=6, n_qa=40, image_size=32, answer_vocab=24, test_fraction=0.25, seed=3)


def _hashes(root):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("vqa") / "data"
    make_vqa_dataset(path, **TINY)
    return path


def test_same_seed_same_bytes(root, tmp_path):
    make_vqa_dataset(tmp_path / "again", **TINY)
    assert _hashes(root) == _hashes(tmp_path / "again")
    make_vqa_dataset(tmp_path / "other", **{**TINY, "seed": 4})
    assert _hashes(root) != _hashes(tmp_path / "other")


def test_images_are_jpeg_files(root):
    images = sorted((root / "images").iterdir())
    assert len(images) == TINY["n_images"]
    assert all(p.read_bytes()[:3] == b"\xff\xd8\xff" for p in images)


def test_second_call_does_not_rewrite(root):
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    summary = make_vqa_dataset(root, **TINY)
    assert summary["created"] is False
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before


def test_other_parameters_rebuild(tmp_path):
    make_vqa_dataset(tmp_path / "d", **TINY)
    summary = make_vqa_dataset(tmp_path / "d", **{**TINY, "n_qa": 20})
    assert summary["created"] and summary["n_train"] + summary["n_test"] == 20
    assert [p.name for p in tmp_path.iterdir()] == ["d"]          # no temporary left over


def test_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        make_vqa_dataset(tmp_path, **TINY)


def test_split_sizes(root):
    summary = make_vqa_dataset(root, **TINY)
    assert (summary["n_train"], summary["n_test"]) == (30, 10)
    train, test = VQAFeatureDataset(root, "train"), VQAFeatureDataset(root, "test")
    assert (len(train.entries), len(test.entries)) == (30, 10)
    qids = [e["qid"] for e in train.entries + test.entries]
    assert sorted(qids) == list(range(40))
    assert {e["answer_type"] for e in train.entries + test.entries} <= {"OPEN", "CLOSED"}


def test_collated_batch_matches_the_post(root):
    ds = VQAFeatureDataset(root, "train", max_text_len=16)
    batch = ds.collote([ds[i] for i in range(4)])
    assert isinstance(batch["image"], list) and batch["image"][0].shape == (4, 3, 32, 32)
    assert batch["image"][0].dtype == torch.float32
    for key in ("text_ids", "text_labels", "text_ids_mlm", "text_labels_mlm", "text_masks"):
        assert batch[key].shape == (4, 16) and batch[key].dtype == torch.long
    assert (batch["text_labels"] == -100).all()
    assert len(batch["vqa_labels"]) == 4 and batch["vqa_labels"][0].shape == (ds.num_answers,)
    assert all(t in ("OPEN", "CLOSED") for t in batch["answer_types"])
    # The post's own way of building the targets.
    targets = torch.cat([batch["vqa_labels"][i].unsqueeze(0) for i in range(4)], dim=0)
    assert targets.shape == (4, ds.num_answers)


def test_multi_hot_labels(root):
    ds = VQAFeatureDataset(root, "test")
    for i, e in enumerate(ds.entries):
        labels = ds[i]["vqa_labels"]
        assert labels.sum().item() == pytest.approx(sum(e["scores"]))
        assert labels.argmax().item() == e["labels"][0]


def test_mlm_masks_only_real_tokens(root):
    ds = VQAFeatureDataset(root, "train", mlm_probability=0.5)
    s = ds[0]
    picked = s["text_labels_mlm"] != -100
    assert picked.any() and (s["text_masks"][picked] == 1).all()
    assert (s["text_labels_mlm"][picked] == s["text_ids"][picked]).all()


def test_test_split_is_deterministic(root):
    ds = VQAFeatureDataset(root, "test")
    a, b = ds[1], ds[1]
    assert torch.equal(a["image"][0], b["image"][0])
    assert torch.equal(a["text_ids_mlm"], b["text_ids_mlm"])


def test_train_transform_follows_torch_seed(root):
    ds = VQAFeatureDataset(root, "train")
    torch.manual_seed(0)
    a = ds[0]["image"][0]
    torch.manual_seed(0)
    assert torch.equal(a, ds[0]["image"][0])


@pytest.mark.parametrize("n", [30, 29])
def test_distributed_sampler_splits_in_two(root, n):
    ds = torch.utils.data.Subset(VQAFeatureDataset(root, "train"), range(n))
    halves = [list(DistributedSampler(ds, num_replicas=2, rank=r, seed=0)) for r in (0, 1)]
    assert len(halves[0]) == len(halves[1]) == (n + 1) // 2
    assert set(halves[0]) | set(halves[1]) == set(range(n))
    # Odd length: the sampler pads rank 1 with one repeated index.
    assert len(set(halves[0]) & set(halves[1])) == n % 2


def test_loader_with_workers(root):
    ds = VQAFeatureDataset(root, "train")
    loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=ds.collote)
    sizes = [len(b["vqa_labels"]) for b in loader]
    assert sizes == [8, 8, 8, 6]


def test_manifest_records_parameters(root):
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["params"] == TINY


def _make(path):
    return make_vqa_dataset(path, **TINY)["created"]


def test_two_processes_at_once(tmp_path):
    # As when every DDP rank calls make_vqa_dataset: one writes, the rest reuse.
    import multiprocessing as mp
    with mp.get_context("fork").Pool(2) as pool:
        created = pool.map(_make, [tmp_path / "d"] * 2)
    assert sorted(created) == [False, True]
    assert [p.name for p in tmp_path.iterdir()] == ["d"]
    assert VQAFeatureDataset(tmp_path / "d", "train").entries
