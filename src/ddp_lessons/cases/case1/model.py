"""An M3AE-shaped model: ViT image encoder, RoBERTa-style text encoder,
co-attention fusion, a VQA head, and (assumed) pre-training heads VQA leaves unused.

The M3AE checkpoint cannot be fetched here; what matters for DDP speed is the
shape: how many parameters, how many gradient bytes an all-reduce moves, and
which parameters get no gradient in a VQA step. `M3AEConfig.m3ae()` is close to
M3AE's size (ViT-B/16 + RoBERTa-base + 6 fusion layers); `M3AEConfig.tiny()`
trains on a CPU core. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from ...tool.ddp import unwrap

# Which top-level modules make up each component, for count_parameters.
COMPONENTS = {
    "vision_encoder": ("vision_encoder",),
    "text_encoder": ("text_encoder",),
    "fusion": ("text_proj", "image_proj", "modality_type", "fusion", "text_pooler", "image_pooler"),
    "vqa_head": ("vqa_head",),
    "mlm_head": ("mlm_head",),
    "itm_head": ("itm_head",),
    "mim_head": ("mim_head",),
}
# An assumption of the stand-in: upstream M3AE builds its MLM, ITM and MIM heads only when their losses
# are on, and its VQA-RAD fine-tuning config turns on the VQA loss alone (`text_pooler_bytes`: what it
# leaves unused instead).
UNUSED_BY_VQA = ("mlm_head", "itm_head", "mim_head")


@dataclass
class M3AEConfig:
    """Sizes of the model; the defaults are M3AE's (see `m3ae()`). Defined in notebook 01_case1_broken."""
    image_size: int = 224
    patch_size: int = 16
    vision_layers: int = 12
    vision_width: int = 768
    vision_heads: int = 12
    vocab_size: int = 50265          # RoBERTa's
    max_positions: int = 514
    text_layers: int = 12
    text_width: int = 768
    text_heads: int = 12
    fusion_layers: int = 6
    hidden_size: int = 768
    fusion_heads: int = 12
    mlp_ratio: int = 4
    num_answers: int = 458           # M3AE's VQA-RAD answer vocabulary
    mim_decoder_width: int = 384
    mim_decoder_layers: int = 4
    mim_decoder_heads: int = 6
    dropout: float = 0.1
    pad_id: int = 1

    @classmethod
    def m3ae(cls, **overrides) -> "M3AEConfig":
        """About M3AE's size: ViT-B/16 at 224 px, RoBERTa-base, 6 fusion layers."""
        return replace(cls(), **overrides)

    @classmethod
    def tiny(cls, **overrides) -> "M3AEConfig":
        """Same structure, small widths: a batch-8 step at 64 px is milliseconds on a core."""
        small = dict(image_size=64, patch_size=8, vision_layers=2, vision_width=64,
                     vision_heads=2, text_layers=2, text_width=64, text_heads=2,
                     fusion_layers=2, hidden_size=64, fusion_heads=2, max_positions=66,
                     mim_decoder_width=32, mim_decoder_layers=1, mim_decoder_heads=2)
        return replace(cls(), **{**small, **overrides})

    @classmethod
    def from_dict(cls, d: Mapping, base: "M3AEConfig | None" = None) -> "M3AEConfig":
        """Take the known keys from a dict (e.g. the post's yaml config), ignore the rest."""
        names = {f.name for f in fields(cls)}
        return replace(base or cls(), **{k: v for k, v in d.items() if k in names})


def _block(width: int, heads: int, mlp_ratio: int, dropout: float, pre_ln: bool) -> nn.Module:
    # ViT is pre-LN, BERT/RoBERTa post-LN; both are one TransformerEncoderLayer.
    return nn.TransformerEncoderLayer(width, heads, width * mlp_ratio, dropout, "gelu",
                                      batch_first=True, norm_first=pre_ln)


class VisionEncoder(nn.Module):
    """ViT: patches + [CLS] + learned positions, pre-LN blocks (CLIP-style ln_pre/ln_post)."""

    def __init__(self, c: M3AEConfig):
        super().__init__()
        w, n = c.vision_width, (c.image_size // c.patch_size) ** 2
        self.patch_embed = nn.Conv2d(3, w, c.patch_size, stride=c.patch_size, bias=False)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, w))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, w))
        self.ln_pre, self.ln_post = nn.LayerNorm(w), nn.LayerNorm(w)
        self.layers = nn.ModuleList(_block(w, c.vision_heads, c.mlp_ratio, 0.0, True)
                                    for _ in range(c.vision_layers))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], dim=1) + self.pos_embed
        x = self.ln_pre(x)
        for layer in self.layers:
            x = layer(x)
        return self.ln_post(x)


class TextEncoder(nn.Module):
    """RoBERTa: word + position + token-type embeddings, post-LN blocks."""

    def __init__(self, c: M3AEConfig):
        super().__init__()
        w, self.pad_id = c.text_width, c.pad_id
        self.word_embeddings = nn.Embedding(c.vocab_size, w, padding_idx=c.pad_id)
        self.position_embeddings = nn.Embedding(c.max_positions, w, padding_idx=c.pad_id)
        self.token_type_embeddings = nn.Embedding(1, w)
        self.ln, self.drop = nn.LayerNorm(w), nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(_block(w, c.text_heads, c.mlp_ratio, c.dropout, False)
                                    for _ in range(c.text_layers))

    def forward(self, ids: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        # RoBERTa numbers real tokens from pad_id + 1 and gives padding pad_id.
        keep = (~pad).long()
        pos = torch.cumsum(keep, dim=1) * keep + self.pad_id
        x = self.word_embeddings(ids) + self.position_embeddings(pos)
        x = self.drop(self.ln(x + self.token_type_embeddings(torch.zeros_like(ids))))
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=pad)
        return x


class CoAttentionLayer(nn.Module):
    """One stream of a fusion layer (M3AE's BertCrossLayer): self-attn, cross-attn, FFN."""

    def __init__(self, d: int, heads: int, mlp_ratio: int, dropout: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, heads, dropout, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(d, heads, dropout, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d, d * mlp_ratio), nn.GELU(), nn.Linear(d * mlp_ratio, d))
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, x_pad, y, y_pad):
        x = self.ln1(x + self.drop(self.self_attn(x, x, x, key_padding_mask=x_pad,
                                                  need_weights=False)[0]))
        x = self.ln2(x + self.drop(self.cross_attn(x, y, y, key_padding_mask=y_pad,
                                                   need_weights=False)[0]))
        return self.ln3(x + self.drop(self.ffn(x)))


class Fusion(nn.Module):
    """Co-attention: each layer updates text from image and image from text, together."""

    def __init__(self, c: M3AEConfig):
        super().__init__()
        args = (c.hidden_size, c.fusion_heads, c.mlp_ratio, c.dropout)
        self.text_layers = nn.ModuleList(CoAttentionLayer(*args) for _ in range(c.fusion_layers))
        self.image_layers = nn.ModuleList(CoAttentionLayer(*args) for _ in range(c.fusion_layers))

    def forward(self, t, t_pad, v):
        for tl, vl in zip(self.text_layers, self.image_layers, strict=True):
            t, v = tl(t, t_pad, v, None), vl(v, None, t, t_pad)
        return t, v


class MIMHead(nn.Module):
    """M3AE's masked-image decoder: narrow transformer, predicts each patch's pixels."""

    def __init__(self, c: M3AEConfig):
        super().__init__()
        w, n = c.mim_decoder_width, (c.image_size // c.patch_size) ** 2
        self.embed = nn.Linear(c.hidden_size, w)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, w))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, w))
        self.layers = nn.ModuleList(_block(w, c.mim_decoder_heads, c.mlp_ratio, 0.0, True)
                                    for _ in range(c.mim_decoder_layers))
        self.norm, self.pred = nn.LayerNorm(w), nn.Linear(w, c.patch_size ** 2 * 3)


def _pooler(d: int) -> nn.Module:
    return nn.Sequential(nn.Linear(d, d), nn.Tanh())


class M3AETransformerSS(nn.Module):
    """The model of the post: `logits = model(batch)` for a `collote` batch.

    `forward` returns VQA logits (B x num_answers). With `with_pretrain_heads`
    (the default, an assumption: see UNUSED_BY_VQA) the MLM, ITM and MIM heads
    exist as parameters that the VQA forward never touches, which is what
    makes DDP need find_unused_parameters=True.
    Defined in notebook 01_case1_broken.
    """

    def __init__(self, config: M3AEConfig | Mapping | None = None, with_pretrain_heads: bool = True):
        super().__init__()
        c = config if isinstance(config, M3AEConfig) else M3AEConfig.from_dict(config or {})
        self.config, d = c, c.hidden_size
        self.vision_encoder, self.text_encoder = VisionEncoder(c), TextEncoder(c)
        self.text_proj = nn.Linear(c.text_width, d)
        self.image_proj = nn.Linear(c.vision_width, d)
        self.modality_type = nn.Embedding(2, d)      # 0: text, 1: image
        self.fusion = Fusion(c)
        self.text_pooler, self.image_pooler = _pooler(d), _pooler(d)
        self.vqa_head = nn.Sequential(nn.Linear(2 * d, 2 * d), nn.LayerNorm(2 * d), nn.GELU(),
                                      nn.Linear(2 * d, c.num_answers))
        self.apply(self._init_weights)
        if with_pretrain_heads:
            # Built and initialised after the rest, so the shared weights are the
            # same for a given seed with or without the heads.
            self.mlm_head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d),
                                          nn.Linear(d, c.vocab_size))
            self.itm_head = nn.Linear(2 * d, 2)
            self.mim_head = MIMHead(c)
            for head in (self.mlm_head, self.itm_head, self.mim_head):
                head.apply(self._init_weights)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        # BERT's init; explicit so torch.manual_seed alone fixes every weight.
        if isinstance(m, (nn.Linear, nn.Conv2d, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                m.weight.data[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.MultiheadAttention):
            nn.init.normal_(m.in_proj_weight, std=0.02)
            nn.init.zeros_(m.in_proj_bias)
        for name in ("cls_token", "pos_embed", "mask_token"):
            if isinstance(getattr(m, name, None), nn.Parameter):
                nn.init.normal_(getattr(m, name), std=0.02)

    def forward(self, batch: Mapping) -> torch.Tensor:
        t_pad = batch["text_masks"] == 0
        t = self.text_proj(self.text_encoder(batch["text_ids"], t_pad))
        v = self.image_proj(self.vision_encoder(batch["image"][0]))
        t = t + self.modality_type(torch.zeros_like(t_pad, dtype=torch.long))
        v = v + self.modality_type(torch.ones(v.shape[:2], dtype=torch.long, device=v.device))
        t, v = self.fusion(t, t_pad, v)
        # Both streams pooled at their first ([CLS]/<s>) token, as M3AE does.
        pooled = torch.cat([self.text_pooler(t[:, 0]), self.image_pooler(v[:, 0])], dim=-1)
        return self.vqa_head(pooled)


def count_parameters(model: nn.Module) -> dict:
    """Parameter counts: 'total', 'trainable', one key per component, and
    'unused_by_vqa' (the pre-training heads). Works on a model built on the
    'meta' device. Defined in notebook 01_case1_broken."""
    m = unwrap(model)
    out = {"total": sum(p.numel() for p in m.parameters()),
           "trainable": sum(p.numel() for p in m.parameters() if p.requires_grad)}
    for comp, names in COMPONENTS.items():
        out[comp] = sum(p.numel() for n in names if getattr(m, n, None) is not None
                        for p in getattr(m, n).parameters())
    out["unused_by_vqa"] = sum(out[h] for h in UNUSED_BY_VQA)
    return out


def text_pooler_bytes(c: M3AEConfig) -> int:
    """fp32 gradient bytes of a RoBERTa pooler (dense text_width x text_width, bias): what an upstream-style
    M3AE leaves unused in a VQA step (this stand-in has none). Defined in notebook 01_case1_broken."""
    return (c.text_width * c.text_width + c.text_width) * 4


def drop_unused_heads(model: nn.Module) -> nn.Module:
    """Remove the MLM, ITM and MIM heads, so every parameter gets a gradient in
    a VQA step and DDP can run with find_unused_parameters=False. Call before
    wrapping in DDP; returns the same model. Defined in notebook 03_case1_beyond."""
    if isinstance(model, DistributedDataParallel):
        raise TypeError("drop the heads before wrapping the model in DistributedDataParallel")
    for name in UNUSED_BY_VQA:
        if getattr(model, name, None) is not None:
            setattr(model, name, None)
    return model
