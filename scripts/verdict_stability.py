"""Run the notebooks several times and report every verdict whose outcome changed.

A verdict nbval compares is a promise that its outcome is the same on every
run of CI's machine. This script executes the stored notebooks (as
`scripts/run_notebooks.py` does: a fresh kernel each, outputs never written
back) `--runs` times, optionally beside `--hog K` busy processes, reads every
`verdict: STATUS - claim` line (or worded verdict's sentence) each code cell printed, and compares it with
the stored notebook's line and with the other runs. Every run is appended to
a record (`data/runs/NAME.json`), so runs made at different times (quiet, and
beside a hog) add up to one table.

    python scripts/verdict_stability.py --runs 3 --record verdict-stability-cpu2
    python scripts/verdict_stability.py --runs 2 --hog 2 --record verdict-stability-cpu2
    python scripts/verdict_stability.py --only 00_first_launch --runs 5      # a new verdict, before committing it
    python scripts/verdict_stability.py --report verdict-stability-cpu2      # the table of a record, no run

`make verdicts` runs it (`make verdicts RUNS=5 HOG=2 NB=00_first_launch`).
Exit status 1 when any compared verdict came out otherwise than stored, or a
notebook failed.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from ddp_lessons.tool import records

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_notebooks as rn  # noqa: E402  (a sibling script: the same kernel and execution)

VERDICT = re.compile(r"^verdict: ([A-Z ]+?) - (.*)$")
WORDED = re.compile(r"^verdict: (.*)$")   # a worded verdict: its sentence is its outcome
NUMBERS = re.compile(r"^  deciding numbers: (.*)$")


def _text(out) -> str:
    t = out.get("text") if out.get("output_type") == "stream" else out.get("data", {}).get("text/plain", "")
    return "".join(t) if isinstance(t, list) else (t or "")


def _ignored(cell) -> bool:
    src = cell.source
    return ("NBVAL_IGNORE_OUTPUT" in src or "NBVAL_SKIP" in src
            or {"nbval-ignore-output", "nbval-skip"} & set(cell.metadata.get("tags", [])))


def verdicts(nb) -> list[dict]:
    """Every verdict line of a notebook: nbval's cell number (code cells only),
    whether nbval compares it, its status, claim and deciding numbers."""
    found, k = [], -1
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        k += 1
        n = 0
        for out in cell.get("outputs", []):
            lines = _text(out).splitlines()
            for i, line in enumerate(lines):
                m, w = VERDICT.match(line), WORDED.match(line)
                if not (m or w):
                    continue
                # a worded verdict's sentence differs by outcome: it is known by its cell and place instead
                status, claim = (m.group(1), m.group(2)) if m else (w.group(1), f"code cell {k}, verdict {n}")
                nums = NUMBERS.match(lines[i + 1]) if i + 1 < len(lines) else None
                found.append({"cell": k, "n": n, "compared": not _ignored(cell), "status": status,
                              "claim": claim, "numbers": nums.group(1) if nums else ""})
                n += 1
    return found


def _key(found: list[dict], v: dict) -> tuple[str, int]:
    """A verdict's identity across runs made at different commits: its claim and which
    occurrence of that claim it is in the notebook (a cell added above it moves its cell
    number, not this; the same claim may come out twice, e.g. for two setups)."""
    same = [g for g in found if g["claim"] == v["claim"]]
    return v["claim"], next(i for i, g in enumerate(same) if g is v)


def _hog():
    while True:
        pass


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def run_all(names, runs, hog, timeout):
    """`runs` executions of every notebook in `names`; each run's entry for the record."""
    hogs = [mp.Process(target=_hog, daemon=True) for _ in range(hog)]
    for h in hogs:
        h.start()
    out = []
    try:
        with tempfile.TemporaryDirectory(prefix="ddp_lessons-verdicts-") as tmp:
            tmp = Path(tmp)
            for r in range(runs):
                entry = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "hog": hog,
                         "commit": records.source_commit(), "notebooks": {}}
                for name in names:
                    load_before = load1()
                    res = rn.run_one(name, timeout, False, tmp, keep=tmp)
                    nb = nbformat.read(tmp / f"{name}.ipynb", as_version=4)
                    entry["notebooks"][name] = {"passed": res["passed"], "seconds": res["seconds"],
                                                "error": res["error"], "load": [load_before, load1()],
                                                "verdicts": verdicts(nb)}
                    print(f"run {r + 1}/{runs} {name}: {'passed' if res['passed'] else 'FAILED'} "
                          f"({res['seconds']:.0f} s, load {load_before}->{load1()})", flush=True)
                out.append(entry)
                yield entry
    finally:
        for h in hogs:
            h.terminate()
            h.join()


def _git(*args) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(rn.ROOT), *args], capture_output=True, text=True,
                              timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def at_this_version(name: str, runs: list) -> list:
    """The runs made with the stored notebook `name` as it is now: those whose commit
    has the notebook's last change in its history. Runs of earlier versions stay in
    the record (they show what a change fixed) but do not decide whether it is steady."""
    last = _git("log", "-1", "--format=%H", "--", f"notebooks/{name}.ipynb")
    if last is None:
        return runs
    keep = []
    for run in runs:
        commit = (run.get("commit") or "").split("+")[0]
        if commit and subprocess.run(["git", "-C", str(rn.ROOT), "merge-base", "--is-ancestor", last, commit],
                                     capture_output=True).returncode == 0:
            keep.append(run)
    return keep


def table(stored: dict, runs: list, min_runs: int = 0) -> tuple[list, list]:
    """(rows, problems): one row per stored verdict with its outcome in every run
    made with the notebook as stored now (`at_this_version`); a compared verdict is a problem
    when an outcome differs from the stored one, or when it has fewer than `min_runs` outcomes."""
    rows, problems = [], []
    for name, want in stored.items():
        runs_now = at_this_version(name, runs)
        for v in want:
            outcomes, key = [], _key(want, v)
            for run in runs_now:
                nbrun = run["notebooks"].get(name)
                if nbrun is None:
                    continue
                got = [g for g in nbrun["verdicts"] if _key(nbrun["verdicts"], g) == key]
                outcomes.append(got[0]["status"] if got else "MISSING")
            row = {"notebook": name, "cell": v["cell"], "n": v["n"], "compared": v["compared"],
                   "claim": v["claim"], "stored": v["status"], "outcomes": outcomes,
                   "steady": all(o == v["status"] for o in outcomes)}
            rows.append(row)
            if row["compared"] and (not row["steady"] or len(outcomes) < min_runs):
                problems.append(row)
    return rows, problems


def stored_verdicts(names) -> dict:
    return {n: verdicts(nbformat.read(rn.NB_DIR / f"{n}.ipynb", as_version=4)) for n in names}


def print_table(rows, runs) -> None:
    print(f"\n{len(rows)} verdicts; outcomes over the runs made with each notebook as stored now, of "
          f"{len(runs)} run(s) in all (hog per run: {[r['hog'] for r in runs]}); unsteady ones marked '!':")
    for row in rows:
        mark = "!" if not row["steady"] else " "
        seen = {o: row["outcomes"].count(o) for o in dict.fromkeys(row["outcomes"])}
        print(f"{mark} {row['notebook'][:2]} cell {row['cell']:>2}{'' if row['compared'] else ' (not compared)'}: "
              f"stored {row['stored']}; {len(row['outcomes'])} runs {seen} - {row['claim'][:80]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=1, help="how many times to run the notebooks")
    p.add_argument("--hog", type=int, default=0, help="busy processes running beside them (a loaded machine)")
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="only this notebook (repeatable)")
    p.add_argument("--record", metavar="NAME", help="append the runs to data/runs/NAME.json (made if missing)")
    p.add_argument("--report", metavar="NAME", help="print the table of an existing record and exit: status 1 when "
                   "a compared verdict of a stored notebook changed or has fewer than --min-runs runs at its version")
    p.add_argument("--min-runs", type=int, default=5, help="runs each compared verdict needs in --report")
    p.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = p.parse_args(argv)
    from ddp_lessons.tool.paths import RUNS_DIR
    old = []
    name = args.report or args.record
    if name and records._path(name, RUNS_DIR).exists():
        old = records.load(name, RUNS_DIR)["results"]
    if args.report:   # every stored notebook: one without runs at its version is a problem too
        names = [q.stem for q in sorted(rn.NB_DIR.glob("[0-9][0-9]_*.ipynb"))]
        rows, problems = table(stored_verdicts(names), old, args.min_runs)
        print_table(rows, old)
        print(f"{len(problems)} compared verdict(s) changed or with fewer than {args.min_runs} runs at the stored "
              "version" if problems else f"every compared verdict as stored, {args.min_runs}+ runs each")
        return 1 if problems else 0
    names = [Path(n).stem for n in args.only] or [q.stem for q in sorted(rn.NB_DIR.glob("[0-9][0-9]_*.ipynb"))]
    os.environ["DDP_LESSONS_PROGRESS"] = "0"
    failed = False
    for entry in run_all(names, args.runs, args.hog, args.timeout):
        old.append(entry)
        failed |= not all(nb["passed"] for nb in entry["notebooks"].values())
        if args.record:  # saved after every run: a run cut short keeps what it did
            config = {"what": "verdict outcomes of repeated notebook runs", "notebooks": "see each run"}
            records.save(records.make_record("verdict-stability", config, old), args.record,
                         runs_dir=RUNS_DIR, overwrite=True)
    all_names = sorted({n for r in old for n in r["notebooks"]})
    rows, problems = table(stored_verdicts(all_names), old)
    print_table(rows, old)
    return 1 if problems or failed else 0


if __name__ == "__main__":
    sys.exit(main())
