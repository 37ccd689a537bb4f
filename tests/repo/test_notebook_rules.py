"""What a practitioner reads in each notebook source (notebooks/src): the answer first, with its number
and where the number comes from; prose within bounds; one door into the package; no private names; results
read through `Run`, not chains of subscripts."""

import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
MAX_WORDS, MAX_CELL_WORDS, MAX_IMPORT_LINES = 1800, 120, 3
LABELS = ("measured here", "recorded", "modelled")


def _cells(path):
    return jupytext.read(path).cells


def _words(cell) -> int:
    text = re.sub(r"`[^`]*`", " x ", cell.source)          # code spans count as one word
    text = re.sub(r"\|[-: |]+\|", " ", text)                  # table rules are not words
    return len(re.findall(r"[A-Za-z0-9][\w'.,%/+-]*", text))


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_the_answer_comes_first_with_its_number_and_its_label(path):
    md = [c for c in _cells(path) if c.cell_type == "markdown"]
    first = md[1].source if md[0].source.lstrip().startswith("# ") and len(md[0].source.split()) < 20 else md[0].source
    assert re.search(r"\d", first), f"{path.name}: the first cell after the title gives no number"
    assert any(label in first.lower() for label in LABELS), f"{path.name}: the answer does not say {LABELS}"


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_prose_is_within_bounds(path):
    md = [c for c in _cells(path) if c.cell_type == "markdown"]
    total = sum(_words(c) for c in md)
    assert total <= MAX_WORDS, f"{path.name}: {total} words of markdown (at most {MAX_WORDS})"
    long = [(i, _words(c)) for i, c in enumerate(md) if _words(c) > MAX_CELL_WORDS]
    assert not long, f"{path.name}: markdown cells over {MAX_CELL_WORDS} words (index, words): {long}"


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_one_door_no_private_names_no_subscript_chains(path):
    code = "\n".join(c.source for c in _cells(path) if c.cell_type == "code")
    imports = [ln for ln in code.splitlines() if re.match(r"\s*(from|import)\s+ddp_lessons\b", ln)]
    assert len(imports) <= MAX_IMPORT_LINES, f"{path.name}: {len(imports)} import lines from the package: {imports}"
    private = re.findall(r"(?:import\s+|\.)(_[a-z]\w*)", code)
    assert not private, f"{path.name}: private names {sorted(set(private))}"
    chains = re.findall(r"\w+(?:\[[^\[\]\n]+\]){3,}", code)
    assert not chains, f"{path.name}: chains of three subscripts {chains[:5]}"
