"""The timer's one door: code outside tool/timing reaches a StepTimer through its public methods only (the
doctor's recorder, Lightning's timer, the cases, the benchmarks and the tests), so its bookkeeping can change
behind them."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a private member of a timer, read or written: `timer._cur`, `self.timer._steps`, `REC.timer._outside`, ...
THROUGH = re.compile(r"\btimer\._[a-z]\w*")
# ... or, in a subclass of StepTimer, its own bookkeeping (`self._cur`, `self._new_step()`)
OWN = re.compile(r"\bself\._(?:cur|steps|outside|buckets|epochs|pass_starts|new_step|open_step|optimizer_stepped|"
                 r"forwarded|bucket_done|loader|outside_depth|unfinished|sync|ddp|fr)\b")


def test_nothing_outside_tool_timing_touches_a_timers_private_members():
    offenders = []
    for folder in ("src", "benchmarks", "tests", "notebooks/src", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            if "tool/timing" in path.as_posix() or path.name == "test_timer_door.py":
                continue
            text = path.read_text()
            subclass = re.search(r"class \w+\((?:\w+\.)*StepTimer\)", text) is not None
            for i, line in enumerate(text.splitlines(), 1):
                if THROUGH.search(line) or subclass and OWN.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "use StepTimer's public event methods:\n" + "\n".join(offenders)
