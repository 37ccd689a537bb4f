"""The M3AE-shaped model: shapes, sizes, and the heads a VQA step leaves unused."""

import datetime

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from ddp_lessons.cases.case1.data import VQAFeatureDataset, make_vqa_dataset
from ddp_lessons.cases.case1.model import (M3AEConfig, M3AETransformerSS, count_parameters, drop_unused_heads,
                                           text_pooler_bytes)
from ddp_lessons.tool.ddp import gradient_bytes


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("vqa") / "data"
    make_vqa_dataset(root, n_images=4, n_qa=16, image_size=64, answer_vocab=458)
    ds = VQAFeatureDataset(root, "train")
    return ds.collote([ds[i] for i in range(8)])


def _model(**kw):
    torch.manual_seed(0)
    return M3AETransformerSS(M3AEConfig.tiny(), **kw)


def _vqa_step(model, batch):
    targets = torch.stack(batch["vqa_labels"])
    loss = F.binary_cross_entropy_with_logits(model(batch).float(), targets)
    loss.backward()
    return loss


def test_forward_shape(batch):
    logits = _model()(batch)
    assert logits.shape == (8, 458) and logits.dtype == torch.float32


def test_same_seed_same_weights():
    a, b = _model().state_dict(), _model().state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_pretrain_heads_get_no_gradient(batch):
    model = _model()
    _vqa_step(model, batch)
    no_grad = {n.split(".")[0] for n, p in model.named_parameters() if p.grad is None}
    assert no_grad == {"mlm_head", "itm_head", "mim_head"}


def test_drop_unused_heads_leaves_every_parameter_used(batch):
    model = drop_unused_heads(_model())
    _vqa_step(model, batch)
    assert all(p.grad is not None for p in model.parameters())
    assert count_parameters(model)["unused_by_vqa"] == 0


def test_without_heads_matches_dropped_heads(batch):
    # Same init order for the shared parts: heads are built last.
    a, b = drop_unused_heads(_model()).eval(), _model(with_pretrain_heads=False).eval()
    assert torch.equal(a(batch), b(batch))


def test_tiny_preset_is_small():
    counts = count_parameters(_model())
    assert counts["total"] < 10_000_000
    assert counts["unused_by_vqa"] > 0
    assert gradient_bytes(_model()) == 4 * counts["trainable"]
    assert gradient_bytes(_model(), torch.bfloat16) == 2 * counts["trainable"]


def test_m3ae_preset_size_on_meta():
    with torch.device("meta"):
        model = M3AETransformerSS(M3AEConfig.m3ae())
    counts = count_parameters(model)
    # ViT-B/16 (~86M) + RoBERTa-base (~124M) + 6 fusion layers x 2 streams + heads.
    assert 360e6 < counts["total"] < 390e6
    assert 84e6 < counts["vision_encoder"] < 88e6
    assert 122e6 < counts["text_encoder"] < 126e6
    assert 45e6 < counts["unused_by_vqa"] < 50e6       # mostly the MLM decoder, 768 x 50265
    assert counts["total"] == sum(v for k, v in counts.items()
                                  if k not in ("total", "trainable", "unused_by_vqa"))


def test_config_from_the_posts_dict():
    config = M3AEConfig.from_dict({"image_size": 224, "tokenizer": "roberta-base",
                                   "load_path": "m3ae.ckpt"}, base=M3AEConfig.tiny())
    assert config.image_size == 224 and config.hidden_size == 64


@pytest.mark.skipif(not dist.is_available() or dist.is_initialized(), reason="needs a fresh gloo")
def test_ddp_without_find_unused_raises(batch):
    # One rank is enough: DDP's reducer checks every parameter got a gradient.
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=30))
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(_model(), find_unused_parameters=False)
        _vqa_step(ddp, batch)
        with pytest.raises(RuntimeError, match="Expected to have finished reduction"):
            _vqa_step(ddp, batch)
        fixed = torch.nn.parallel.DistributedDataParallel(drop_unused_heads(_model()))
        _vqa_step(fixed, batch)
        _vqa_step(fixed, batch)
    finally:
        dist.destroy_process_group()


def test_text_pooler_bytes_is_a_roberta_poolers_gradient():
    # what an upstream-style M3AE leaves unused in a VQA step, far less than the assumed heads
    c = M3AEConfig.m3ae()
    assert text_pooler_bytes(c) == gradient_bytes(torch.nn.Linear(c.text_width, c.text_width))
    assert text_pooler_bytes(c) == 2_362_368          # RoBERTa-base: 768 x 768 + 768, fp32
    with torch.device("meta"):
        heads = count_parameters(M3AETransformerSS(c))["unused_by_vqa"] * 4
    assert text_pooler_bytes(c) < heads / 50
