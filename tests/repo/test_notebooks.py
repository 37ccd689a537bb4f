"""The stored notebooks: built from their sources, complete for nbval, framed alike."""

import io
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupytext.config import load_jupytext_config
from jupytext.paired_paths import paired_paths

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import notebooks as build  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NAMES = [p.stem for p in NOTEBOOKS]


def test_every_notebook_has_a_source_and_matches_it(capsys):
    sources = sorted(p.stem for p in (ROOT / "notebooks" / "src").glob("*.py"))
    assert sources == NAMES
    assert build.check() == 0, capsys.readouterr().out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_jupytext_pairs_the_notebook_with_its_source(path):
    formats = load_jupytext_config(str(path.parent)).default_formats(str(path))
    pair = [p for p, _ in paired_paths(str(path), "ipynb", formats)]
    assert pair == [str(path), str(path.parent / "src" / f"{path.stem}.py")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_stored_notebook_is_exactly_what_the_build_writes(path):
    out = io.StringIO()
    nbformat.write(build.clean(nbformat.read(path, as_version=4)), out)
    assert out.getvalue() == path.read_text(), "not as `make notebooks` writes it (saved from JupyterLab?)"


def test_stored_notebooks_carry_no_volatile_metadata():
    # nbstripout's own list of volatile keys, outputs and counts kept (nbval needs both);
    # --keep-id: the build's ids are already stable (cell-000, ...), nbstripout would renumber them 0, 1, ...
    cmd = [sys.executable, "-m", "nbstripout", "--verify", "--keep-output", "--keep-count", "--keep-id"]
    r = subprocess.run(cmd + [str(p) for p in NOTEBOOKS], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_reference_outputs_are_complete(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "regenerate with `make notebooks`"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "run top to bottom once"
    errors = [c for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, "a stored cell ended in an error"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_every_stored_image_decodes(path):
    # what a reader's JupyterLab draws from the stored outputs (the browser test opens one notebook)
    import base64

    import matplotlib.image
    nb = nbformat.read(path, as_version=4)
    images = [o.data["image/png"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    for png in images:
        pixels = matplotlib.image.imread(io.BytesIO(base64.b64decode(png)), format="png")
        assert pixels.shape[0] > 10 and pixels.shape[1] > 10


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_frame_names_neighbours_and_ends_on_exercises(path):
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    i = NAMES.index(path.stem)
    assert "What you will learn" in text
    if i > 0:
        assert NAMES[i - 1] in text, f"does not name the notebook before it ({NAMES[i - 1]})"
    if i + 1 < len(NAMES):
        assert NAMES[i + 1] in text, f"does not name the notebook after it ({NAMES[i + 1]})"
    assert "## Exercises" in text
    last_code = [c for c in nb.cells if c.cell_type == "code"][-1]
    assert "check(" in last_code.source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_widget_cells_have_a_plain_call_beside_them(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, c in enumerate(code):
        if "interact(" in c.source or "widgets." in c.source and "observe(" in c.source:
            nxt = code[i + 1] if i + 1 < len(code) else None
            assert nxt is not None and "NBVAL_IGNORE_OUTPUT" not in nxt.source.splitlines()[0], \
                f"widget cell {i} has no checked plain call after it"


# Prose that hands the reader to a verdict instead of saying what the run showed.
DEFERRING = ("verdict above", "verdicts above", "where the verdict", "where the verdicts", "whether the verdict",
             "if the verdict", "the verdict says", "the verdicts say", "read the verdicts")


def verdicts_per_section(nb) -> dict:
    """Section heading ("## ...") -> verdict lines its stored outputs print."""
    counts, heading = {}, "(before the first section)"
    for c in nb.cells:
        if c.cell_type == "markdown":
            heading = next((ln for ln in c.source.splitlines() if ln.startswith("## ")), heading)
            continue
        for o in c.get("outputs", []):
            text = o.get("text", "") if o.get("output_type") == "stream" else o.get("data", {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            n = sum(ln.strip().startswith("verdict:") for ln in text.splitlines())
            counts[heading] = counts.get(heading, 0) + n
    return counts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_at_most_one_verdict_a_section_and_prose_that_says_what_happened(path):
    nb = nbformat.read(path, as_version=4)
    over = {h: n for h, n in verdicts_per_section(nb).items() if n > 1}
    assert not over, f"sections with more than one verdict line: {over}"
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown").lower()
    deferring = [p for p in DEFERRING if p in prose]
    assert not deferring, f"prose that defers to a verdict instead of saying what happened: {deferring}"
