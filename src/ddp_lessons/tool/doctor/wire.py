"""What the doctor's two halves share: the doctor's process (`doctor.command`) and the rank half it puts in
the processes it starts (`doctor.rank`). The environment variables that carry the settings, the knobs
`--confirm` sets, why a rank's result was written, and the rank file (one JSON per rank, with the timer's
result and a "doctor" block). Standard library only: the rank half loads it before anything else of
the package is importable.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

ENV_DIR = "DDP_LESSONS_DOCTOR_DIR"          # where each rank writes its file; set: the rank half installs
ENV_STEPS = "DDP_LESSONS_DOCTOR_STEPS"      # stop after the warm-up and this many optimizer steps
ENV_WARMUP = "DDP_LESSONS_DOCTOR_WARMUP"    # optimizer steps before the measured window
ENV_KNOBS = "DDP_LESSONS_DOCTOR_SET"        # the knobs, as JSON
ENV_PROFILE = "DDP_LESSONS_DOCTOR_PROFILE"  # GPU steps profiled after --steps for the busy share (0: none)
ENVS = (ENV_DIR, ENV_STEPS, ENV_WARMUP, ENV_KNOBS, ENV_PROFILE)

# Why a rank's result was written. The first three: the script reached its end (or the doctor stopped it).
DESTROYED = "the script destroyed its process group"
ENDED = "the script ended"
STOPPED = "stopped after --steps"
REACHED_END = (DESTROYED, ENDED, STOPPED)
INTERRUPTED = "the script was interrupted (SIGINT)"
TERMINATED = "the script was terminated (SIGTERM)"


def raised(exc_name: str) -> str:
    return f"the script raised {exc_name}"


@dataclass(frozen=True)
class Knobs:
    """What `--confirm` (or `--knob`) changes where the script builds its objects: DDP's and the
    DataLoader's constructor arguments, torch's threads in each rank's own process, a compression hook."""
    ddp: dict = field(default_factory=dict)
    loader: dict = field(default_factory=dict)
    threads: int | None = None
    hook: str | None = None

    @classmethod
    def of(cls, d: dict | None) -> Knobs:
        d = d or {}
        return cls(dict(d.get("ddp") or {}), dict(d.get("loader") or {}), d.get("threads") or None,
                   d.get("hook") or None)

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v}

    def name(self) -> str:
        """As printed: `bucket_cap_mb=25`, `num_workers=1`, `threads=1`, `hook=bf16`."""
        parts = [f"{k}={v}" for where in (self.ddp, self.loader) for k, v in where.items()
                 if k != "persistent_workers"]
        parts += [f"{k}={v}" for k, v in (("threads", self.threads), ("hook", self.hook)) if v]
        return ", ".join(parts)

    def __bool__(self) -> bool:
        return bool(self.as_dict())


@dataclass
class Settings:
    """A rank's settings, read from its environment."""
    out_dir: str
    steps: int | None = None
    warmup: int = 3
    knobs: Knobs = field(default_factory=Knobs)
    profile: int = 0

    @classmethod
    def from_env(cls, env=os.environ) -> Settings | None:
        if not env.get(ENV_DIR):
            return None
        return cls(env[ENV_DIR], int(env.get(ENV_STEPS) or 0) or None, int(env.get(ENV_WARMUP) or 3),
                   Knobs.of(json.loads(env.get(ENV_KNOBS) or "{}")), int(env.get(ENV_PROFILE) or 0))

    def to_env(self, env: dict) -> dict:
        """`env` with these settings (and none left over from an outer doctor)."""
        for k in ENVS:
            env.pop(k, None)
        env[ENV_DIR], env[ENV_WARMUP] = self.out_dir, str(self.warmup)
        env[ENV_KNOBS] = json.dumps(self.knobs.as_dict())
        env[ENV_PROFILE] = str(self.profile)
        if self.steps:
            env[ENV_STEPS] = str(self.steps)
        return env


@dataclass
class RankReport:
    """The "doctor" block of a rank's file: why it was written, the optimizer steps and the measured
    window (host perf_counter at the warm-up's end and at the last optimizer step's end), what the rank
    half's own hooks took (`hook_s` over `hook_calls`, and `untimed_s`: their calls' cost outside that, from a
    calibration), the GPU's busy share where steps were profiled."""
    reason: str
    optimizer_steps: int
    warmup: int
    window: list
    hook_s: float
    hook_calls: int
    notes: list
    pid: int
    knobs: dict
    model: str
    busy: dict | None = None
    start_method: str | None = None
    untimed_s: float = 0.0      # what the hooks cost outside what they time, from a calibration per call
    eval_loaders: list = field(default_factory=list)   # the loaders evaluations took batches from


def rank_file(out_dir: str, rank: int) -> str:
    return os.path.join(out_dir, f"rank-{rank}.json")


def write_rank(out_dir: str, rank: int, result: dict, report: RankReport) -> str:
    """Write a rank's result with its "doctor" block, atomically (a rank killed while writing leaves
    no half file)."""
    path = rank_file(out_dir, rank)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({**result, "doctor": asdict(report)}, f, default=str)
    os.replace(tmp, path)
    return path


def update_report(path: str, **fields) -> None:
    """Set `fields` in the "doctor" block of a rank file already written (atomically)."""
    with open(path) as f:
        data = json.load(f)
    data.setdefault("doctor", {}).update(fields)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, default=str)
    os.replace(tmp, path)


def read_ranks(out_dir: str) -> list[dict]:
    """Every rank's file, in rank order (a file cut short by a killed rank is left out)."""
    out: list[dict[str, Any]] = []
    if not os.path.isdir(out_dir):
        return out
    for name in sorted(os.listdir(out_dir)):
        if not (name.startswith("rank-") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(out_dir, name)) as f:
                out.append(json.load(f))
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(out, key=lambda r: r.get("rank", 0))
