"""Run records: what ran, on what, and every rank's per-step numbers, as JSON.

A record is a dict with a schema name and version, the configuration, the
hardware and software (`machine_info()`), and the results. `save` writes
atomically and never replaces an existing record unless asked; `load` refuses
a corrupt file or another schema version with a message that says what to do.
Records go to `runs_dir=`, else $DDP_LESSONS_RUNS, else ./runs (`default_dir()`); reading by name
also looks in the course's own records (`RUNS_DIR`). Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path

from . import runtime
from .paths import REPO, RUNS_DIR  # RUNS_DIR: the course's own records, data/runs in the repository

SCHEMA = "ddp-lessons/run"
SCHEMA_VERSION = 1
ENV_VAR = "DDP_LESSONS_RUNS"


class RecordError(ValueError):
    """A run record that cannot be read or written as asked."""


def machine_info(backend: str | None = None) -> dict:
    """Hardware and software of this machine: devices, CPUs, torch, NCCL, Python.

    GPUs and the driver are read through NVML, never through torch.cuda: even
    `torch.cuda.is_available()` starts the CUDA driver in this process, and
    workers forked after that cannot use CUDA (see `launch`'s fork check). Defined in notebook 00_first_launch."""
    import torch
    info = {"python": platform.python_version(),
            "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "cpu_affinity": runtime.cpu_count(),
            "cpu_model": _cpu_model(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "gloo": torch.distributed.is_gloo_available(),
            "backend": backend, "gpus": [], "nccl": None, "driver": None}
    info.update(_nvml_gpus())
    if info["gpus"] and torch.distributed.is_nccl_available():
        v = torch.cuda.nccl.version()  # the library's version string: no CUDA context
        info["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    return info


def _nvml_gpus() -> dict:
    """GPU names and the driver version from NVML; nothing where NVML is missing."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVIDIA driver or no nvidia-ml-py: no GPUs to name
        return {}
    try:
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                 for i in range(pynvml.nvmlDeviceGetCount())]
        driver = pynvml.nvmlSystemGetDriverVersion()
        as_str = lambda s: s.decode() if isinstance(s, bytes) else s  # noqa: E731 - older bindings give bytes
        return {"gpus": [as_str(n) for n in names], "driver": as_str(driver)}
    finally:
        pynvml.nvmlShutdown()


def gpu_topology() -> str | None:
    """`nvidia-smi topo -m`, or None where there is no NVIDIA GPU."""
    return _nvidia_smi("topo", "-m")


def _nvidia_smi(*args):
    try:
        out = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if args[0].startswith("--query") and out.stdout else out.stdout


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def make_record(kind: str, config: dict, results, backend: str | None = None, **extra) -> dict:
    """A new record of `kind` (e.g. 'allreduce', 'case1') with this machine's info."""
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "kind": kind,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_info(backend), "commit": source_commit(), "config": config,
            "results": results, **extra}


def source_commit() -> str | None:
    """The course repository's commit (with "+dirty" when files differ from it),
    or None outside a git checkout: what a record's numbers were measured at.
    A copy of the checkout without its .git (a lent GPU machine gets the files
    only) names it in $DDP_LESSONS_COMMIT."""
    if os.environ.get("DDP_LESSONS_COMMIT"):
        return os.environ["DDP_LESSONS_COMMIT"]
    try:
        def git(*a):
            return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True,
                                  text=True, timeout=10, check=True).stdout.strip()
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def default_dir() -> Path:
    """Where `save` writes without `runs_dir`: $DDP_LESSONS_RUNS, else ./runs in the current
    directory; never inside the installed package. The course's scripts save to its own records,
    `RUNS_DIR` (data/runs of the course's repository), by passing `runs_dir=RUNS_DIR`."""
    return Path(os.environ.get(ENV_VAR) or "runs")


def _search_dirs(runs_dir) -> list[Path]:
    if runs_dir is not None:
        return [Path(runs_dir)]
    # Reading by name without runs_dir (`load`, `list_records`, `course.replay.stored_or_live`): here first,
    # then the course's records, so the notebooks find both; a name found in both is the user's.
    course = [RUNS_DIR] if (REPO / "pyproject.toml").exists() else []  # a source checkout only
    return [default_dir(), *course]


def _find(name_or_path, runs_dir) -> Path:
    dirs = _search_dirs(runs_dir)
    paths = [_path(name_or_path, d) for d in dirs]
    return next((p for p in paths if p.exists()), paths[0])


def _path(name_or_path, runs_dir):
    p = Path(name_or_path)
    if p.suffix != ".json":
        p = p.with_suffix(".json")
    return p if p.is_absolute() or p.parent != Path(".") else Path(runs_dir) / p


def exists(name: str, runs_dir=None) -> bool:
    """Would `save(..., name, runs_dir)` find a record there already?"""
    return _path(name, runs_dir if runs_dir is not None else default_dir()).exists()


def save(record: dict, name: str, runs_dir=None, overwrite: bool = False) -> Path:
    """Write `record` to runs_dir/name.json atomically (runs_dir None:
    `default_dir()`; a name with a folder is a path); refuse to replace one."""
    path = _path(name, default_dir() if runs_dir is None else runs_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(in_repo_terms(record), f, indent=1, sort_keys=True, default=_jsonable)
            f.write("\n")
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # atomic, and fails if the name is taken
            except FileExistsError:
                raise RecordError(f"{path} exists: pass overwrite=True to replace it, or choose another name") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def in_repo_terms(obj):
    """`obj` with every string that is a path inside this checkout made relative to it: a record names
    no folder of the machine that made it (".venv/bin/torchrun", not "/home/me/ddp-lessons/...").
    From an installed package (no checkout around it) `obj` as it is."""
    if not (REPO / "pyproject.toml").is_file() or not (REPO / "src" / "ddp_lessons").is_dir():
        return obj
    prefix = f"{REPO}{os.sep}"
    if isinstance(obj, str):
        return obj[len(prefix):] if obj.startswith(prefix) else obj
    if isinstance(obj, dict):
        return {k: in_repo_terms(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [in_repo_terms(v) for v in obj]
    return obj


def _jsonable(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)


def load(name_or_path, runs_dir=None) -> dict:
    """Read a record (runs_dir None: `default_dir()`, then the course's records);
    a clear RecordError if it is missing, corrupt or of another schema. Defined in notebook 00_first_launch."""
    path = _find(name_or_path, runs_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RecordError(f"no run record at {path}: record it first (see README, 'Recording GPU runs')") from None
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno}): "
                          "the file is corrupt; record the run again") from None
    if not isinstance(rec, dict) or rec.get("schema") != SCHEMA:
        raise RecordError(f"{path} is not a ddp-lessons run record (no schema {SCHEMA!r})")
    version = rec.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(f"{path} has schema version {version}, this ddp-lessons reads version "
                          f"{SCHEMA_VERSION}: record the run again with this version")
    return rec


def list_records(kind: str | None = None, runs_dir=None) -> list[str]:
    """Names of the records in runs_dir (None: `default_dir()` and the course's
    records), of one `kind` if given, sorted. Defined in notebook 00_first_launch."""
    names = []
    for p in sorted({p.name: p for d in reversed(_search_dirs(runs_dir)) for p in Path(d).glob("*.json")}.values()):
        try:
            rec = load(p)
        except RecordError:
            continue
        if kind is None or rec.get("kind") == kind:
            names.append(p.stem)
    return sorted(names)


def describe_machine(rec: dict) -> str:
    """One line naming the hardware and versions a record was made on, and where it came from: its commit
    (or that it names none), an uncommitted tree, a torch other than the one reading it
    (ending 'measured live in this run' for one `course.replay.stored_or_live` made here).
    Defined in notebook 00_first_launch."""
    import torch
    m = rec["machine"]
    cores = m.get("cpu_affinity") or m["cpu_count"]
    dev = f"{len(m['gpus'])}x {m['gpus'][0]}" if m.get("gpus") else f"{cores} CPU cores ({m.get('cpu_model')})"
    extra = f", NCCL {m['nccl']}, driver {m['driver']}" if m.get("nccl") else ""
    line = f"{dev}; torch {m['torch']}{extra}; Python {m['python']}"
    if rec.get("live"):
        return line + "; measured live in this run"
    commit, note = rec.get("commit"), rec.get("commit_note") or ""
    line += f"; recorded {rec['created'][:10]} at " + (f"commit {str(commit).split('+')[0][:7]}" if commit else
                                                       "no recorded commit")
    if not commit and rec.get("committed_at"):   # made before records named their commit: the one that added it
        line += f" (added to the repository at {rec['committed_at']})"
    if "uncommitted" in note or str(commit).endswith(("+dirty", "+wip")):
        line += ", from an uncommitted tree"
    if m["torch"] != torch.__version__:
        line += f" (read here with torch {torch.__version__})"
    return line
