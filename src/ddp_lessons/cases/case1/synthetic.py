"""The VQA-RAD-shaped stand-in dataset, written to disk (`data` reads it).

VQA-RAD itself (315 radiology images, 3,515 question-answer pairs) cannot be
fetched here, so `make_vqa_dataset` writes a stand-in with the same shape:
JPEG images that must be decoded and transformed, question token ids in
RoBERTa's id range, multi-hot answer labels with scores, OPEN/CLOSED answer
types. What the loader costs per sample is what matters for the lessons, not
what the pictures show; still, answers follow from the drawn image, so a model
can learn something. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ...tool.paths import DATA_DIR

FORMAT = 1
BOS, PAD, EOS, MASK, VOCAB_SIZE = 0, 1, 2, 50264, 50265   # RoBERTa's special ids
ORGANS, MODALITIES = ("head", "chest", "abdomen"), ("ct", "mri", "x-ray")
COUNTS = ("none", "one", "two", "three")
FIXED_ANSWERS = ("yes", "no") + ORGANS + MODALITIES + COUNTS
# (answer type, freeform wording, paraphrase, what the answer is about)
TEMPLATES = (
    ("CLOSED", "is there a lesion", "is there an abnormality in the {organ}", "has_lesion"),
    ("CLOSED", "is this a {ask_organ} image", "is the {ask_organ} shown here", "is_organ"),
    ("CLOSED", "is this a {ask_modality} scan", "was this taken with {ask_modality}", "is_modality"),
    ("CLOSED", "are there multiple lesions", "is more than one lesion seen", "multiple"),
    ("OPEN", "what organ is shown", "which part of the body is imaged", "organ"),
    ("OPEN", "what imaging modality was used", "how was this image taken", "modality"),
    ("OPEN", "how many lesions are there", "how many abnormalities are seen", "count"),
    ("OPEN", "what is the abnormality", "what abnormality is seen in the {organ}", "finding"),
)


def _word_id(word: str) -> int:
    # A fixed word -> id map inside RoBERTa's range, away from the special ids.
    return 3 + zlib.crc32(word.encode()) % 50000


@dataclass(frozen=True)
class Params:
    """What a dataset is made from (the manifest's "params"): the same ones give the same bytes."""
    n_images: int
    n_qa: int
    image_size: int
    test_fraction: float
    answer_vocab: int
    seed: int


@dataclass(frozen=True)
class Facts:
    """What one image shows, drawn once: its organ and modality (indexes of ORGANS, MODALITIES), how many
    lesions, and its finding (an index of the long tail; -1 without lesions)."""
    organ: int
    modality: int
    n_lesions: int
    finding: int


def _image_facts(rng: np.random.Generator, n_tail: int) -> Facts:
    n = int(rng.choice(4, p=[0.3, 0.4, 0.2, 0.1]))
    # Findings are long-tailed, as in VQA-RAD: a few common, most rare.
    finding = int(min(rng.zipf(1.6) - 1, n_tail - 1)) if n else -1
    return Facts(organ=int(rng.integers(3)), modality=int(rng.integers(3)), n_lesions=n, finding=finding)


def _draw(rng: np.random.Generator, facts: Facts, size: int) -> Image.Image:
    """A grey 'scan': body outline by organ, contrast by modality, bright lesions."""
    yy, xx = np.mgrid[0:size, 0:size] / (size - 1) * 2 - 1
    body = {0: xx**2 + yy**2, 1: (xx / 0.95)**2 + (yy / 0.8)**2,
            2: (xx / 0.9)**2 + (yy / 0.7)**2}[facts.organ] < 0.85
    img = np.where(body, 0.45 + 0.15 * yy, 0.05)
    if facts.organ == 1:                          # two dark lungs
        img -= 0.3 * ((((np.abs(xx) - 0.42) / 0.3)**2 + (yy / 0.55)**2) < 1)
    # Low-frequency tissue texture plus fine noise: keeps JPEG from squeezing it flat.
    coarse = Image.fromarray(rng.random((8, 8)).astype(np.float32))
    img = img + 0.15 * np.asarray(coarse.resize((size, size), Image.Resampling.BICUBIC)) * body
    img = img + rng.normal(0, (0.03, 0.06, 0.02)[facts.modality], (size, size))
    for _ in range(facts.n_lesions):
        cx, cy = rng.uniform(-0.5, 0.5, 2)
        r = (0.06 + 0.03 * (facts.finding % 5)) * rng.uniform(0.8, 1.2)
        img += 0.4 * np.exp(-((xx - cx)**2 + ((yy - cy) * (1 + facts.finding % 3))**2) / r**2)
    gamma = (1.0, 0.7, 1.4)[facts.modality]
    img = np.clip(img, 0, 1) ** gamma
    return Image.fromarray((img * 255).round().astype(np.uint8))


def _qa(rng: np.random.Generator, facts: Facts, n_answers: int) -> dict:
    kinds = [t for t in TEMPLATES if facts.n_lesions or t[3] != "finding"]
    atype, free, para, kind = kinds[rng.integers(len(kinds))]
    ask_o, ask_m = int(rng.integers(3)), int(rng.integers(3))
    phrase = "freeform" if rng.random() < 0.6 else "para"
    text = (free if phrase == "freeform" else para).format(
        organ=ORGANS[facts.organ], ask_organ=ORGANS[ask_o], ask_modality=MODALITIES[ask_m])
    yes = {"has_lesion": facts.n_lesions > 0, "is_organ": ask_o == facts.organ,
           "is_modality": ask_m == facts.modality, "multiple": facts.n_lesions > 1}
    answer = {"organ": ORGANS[facts.organ], "modality": MODALITIES[facts.modality],
              "count": COUNTS[facts.n_lesions]}.get(kind)
    if kind in yes:
        answer = "yes" if yes[kind] else "no"
    labels, scores = [], [1.0]
    if kind == "finding":
        labels = [len(FIXED_ANSWERS) + facts.finding]
        if rng.random() < 0.1 and labels[0] + 1 < n_answers:   # a near-synonym, part credit
            labels.append(labels[0] + 1)
            scores.append(0.3)
    else:
        labels = [FIXED_ANSWERS.index(answer)]
    ids = [BOS] + [_word_id(w) for w in text.split()] + [_word_id("?"), EOS]
    return {"question": text + "?", "question_ids": ids, "labels": labels, "scores": scores,
            "answer_type": atype, "phrase_type": phrase}


def _write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, sort_keys=True, separators=(",", ":")))


def _build(out: Path, p: Params) -> None:
    n_tail = p.answer_vocab - len(FIXED_ANSWERS)
    answers = list(FIXED_ANSWERS) + [f"finding_{k:03d}" for k in range(n_tail)]
    (out / "images").mkdir()
    facts = []
    for i in range(p.n_images):
        # One generator per image: image i is the same whatever n_images is.
        rng = np.random.default_rng([p.seed, 1, i])
        facts.append(_image_facts(rng, n_tail))
        # Fixed JPEG settings, no metadata: same seed, same bytes.
        _draw(rng, facts[-1], p.image_size).save(out / "images" / f"synpic{i:05d}.jpg",
                                                     quality=90, optimize=False)
    rng = np.random.default_rng([p.seed, 2])
    # Every image gets at least one question (VQA-RAD: about 11 per image).
    which = np.concatenate([np.arange(p.n_images),
                            rng.integers(p.n_images, size=max(0, p.n_qa - p.n_images))])
    which = rng.permutation(which)[:p.n_qa]
    entries = [dict(qid=q, image_name=f"synpic{i:05d}.jpg", **_qa(rng, facts[i], len(answers)))
               for q, i in enumerate(which.tolist())]
    n_test = round(p.n_qa * p.test_fraction)
    _write_json(out / "train.json", entries[:len(entries) - n_test])
    _write_json(out / "test.json", entries[len(entries) - n_test:])
    _write_json(out / "answers.json", answers)
    files = {f.relative_to(out).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
             for f in sorted(out.rglob("*")) if f.is_file()}
    _write_json(out / "manifest.json", {"format": FORMAT, "params": asdict(p), "files": files,
                                        "vocab_size": VOCAB_SIZE})


def _existing(root: Path, p: Params) -> dict | None:
    try:
        m = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    complete = all((root / f).is_file() for f in m.get("files", {}))
    return m if complete and m.get("format") == FORMAT and m.get("params") == asdict(p) else None


def _summary(root: Path, m: dict, created: bool) -> dict:
    sizes = {f: (root / f).stat().st_size for f in m["files"]}
    n_train, n_test = (len(json.loads((root / f"{s}.json").read_text())) for s in ("train", "test"))
    return {"root": str(root), "created": created, **m["params"], "n_train": n_train,
            "n_test": n_test, "num_answers": m["params"]["answer_vocab"],
            "bytes": sum(sizes.values()) + (root / "manifest.json").stat().st_size,
            "image_bytes": sum(v for f, v in sizes.items() if f.startswith("images/"))}


def make_vqa_dataset(root, n_images: int = 315, n_qa: int = 3515, image_size: int = 64,
                     test_fraction: float = 0.13, answer_vocab: int = 458, seed: int = 0) -> dict:
    """Write the stand-in dataset to `root` unless it is already there.

    Returns a summary dict: root, created (False when an identical dataset was
    found), the parameters, n_train, n_test, num_answers, bytes, image_bytes.
    The same parameters give byte-identical files. `answer_vocab` is the number
    of distinct answers (M3AE's VQA-RAD vocabulary has about 458). On disk:
    images/synpicNNNNN.jpg, train.json and test.json (the entries), answers.json
    (label -> answer), manifest.json (the parameters and a sha256 per file).
    Defined in notebook 03_case1_beyond.
    """
    if answer_vocab <= len(FIXED_ANSWERS):
        raise ValueError(f"answer_vocab must exceed {len(FIXED_ANSWERS)}")
    if n_images < 1 or n_qa < 1 or not 0 <= test_fraction < 1:
        raise ValueError("need n_images >= 1, n_qa >= 1, 0 <= test_fraction < 1")
    p = Params(n_images=n_images, n_qa=n_qa, image_size=image_size,
               test_fraction=test_fraction, answer_vocab=answer_vocab, seed=seed)
    root = Path(root)
    if (m := _existing(root, p)) is not None:
        return _summary(root, m, created=False)
    if root.exists() and any(root.iterdir()) and not (root / "manifest.json").exists():
        raise FileExistsError(f"{root} holds files that are not a dataset of ours")
    root.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target, then rename: a reader (or a second rank making
    # the same dataset) never sees a half-written directory.
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
    try:
        _build(tmp, p)
        if (m := _existing(root, p)) is not None:    # another process finished first
            return _summary(root, m, created=False)
        if root.exists() and any(root.iterdir()):
            # A rename never lands on a non-empty directory, so what is here now is whole: another
            # process's dataset renamed in since the check above (use it), or ours with other parameters.
            if (m := _existing(root, p)) is not None:
                return _summary(root, m, created=False)
            old = Path(tempfile.mkdtemp(prefix=f".{root.name}.old-", dir=root.parent))
            os.rename(root, old / "d")
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.rename(tmp, root)
        except OSError:                              # ... or renamed at the same moment
            if (m := _existing(root, p)) is None:
                raise
            return _summary(root, m, created=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _summary(root, _existing(root, p), created=True)


# The CPU default: small enough that a notebook runs several launches in ~40 s.
TINY_DATA = dict(n_images=64, n_qa=400, image_size=64)


def tiny_dataset(root=None) -> dict:
    """Make (once) the CPU default dataset in data/vqa_tiny; returns make_vqa_dataset's summary.
    Defined in notebook 01_case1_broken."""
    return make_vqa_dataset(root or DATA_DIR / "vqa_tiny", **TINY_DATA)


GPU_IMAGE_SIZE = 224  # the recorded GPU runs' images: M3AE's input size


def gpu_dataset(root=None) -> dict:
    """Make (once) the VQA-RAD-size dataset at 224 px the recorded GPU runs read, in data/."""
    return make_vqa_dataset(root or DATA_DIR / f"vqa_rad_{GPU_IMAGE_SIZE}", image_size=GPU_IMAGE_SIZE)


def cli_command(p):
    """`python -m ddp_lessons make-vqa-data`: write the stand-in dataset (`make data` runs it)."""
    p.add_argument("--root", default=str(DATA_DIR / "vqa_rad"),
                   help="where to write it (default: data/vqa_rad)")
    p.add_argument("--n-images", type=int, default=315)
    p.add_argument("--n-qa", type=int, default=3515)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--test-fraction", type=float, default=0.13)
    p.add_argument("--answer-vocab", type=int, default=458)
    p.add_argument("--seed", type=int, default=0)

    def run(args):
        s = make_vqa_dataset(args.root, n_images=args.n_images, n_qa=args.n_qa,
                             image_size=args.image_size, test_fraction=args.test_fraction,
                             answer_vocab=args.answer_vocab, seed=args.seed)
        what = "wrote" if s["created"] else "found (unchanged)"
        print(f"{what} {s['root']}: {s['n_images']} images at {s['image_size']} px, "
              f"{s['n_train']} train / {s['n_test']} test questions, {s['bytes'] / 1e6:.1f} MB")
    return run
