"""Checks `launch` makes before it starts any process: world size, backend and
GPUs, a worker the children can import, CUDA state before a fork.

Each refusal is a one-line error that says what to do.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import os
import pickle
import sys

from .errors import CudaForkError, LaunchConfigError, NotebookWorkerError

START_METHODS = ("spawn", "fork", "forkserver")


def default_start_method() -> str:
    """"forkserver" where the platform has it (Linux, macOS), else "spawn".

    A fork server is a clean process started once (it has run no compute and
    touched no CUDA) that forks each worker: spawn's safety (the kernel's
    state is not copied; a worker must be importable) at close to fork's
    speed. It lives as long as the launching process.
    """
    import multiprocessing as mp
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def visible_gpus(start_method: str = "spawn") -> int:
    """How many CUDA devices the workers could use, without initialising CUDA here."""
    import torch
    if not torch.backends.cuda.is_built() and not torch.version.hip:
        return 0
    if start_method == "fork" and not torch.cuda.is_initialized():
        count = getattr(torch.cuda, "_device_count_nvml", lambda: -1)()
        return max(count, 0)  # NVML query: leaves this process fork-safe
    # torch asks NVML first here too, and starts the CUDA driver (which would
    # stop a later fork) only where NVML cannot answer.
    return torch.cuda.device_count()


def resolve_backend(backend, world_size, gpus):
    """The backend for `world_size` ranks with `gpus` visible (see `placement.place`).

    None: NCCL when every rank can have a GPU of its own, else gloo. An
    explicit backend is honoured, or refused when it cannot work.
    """
    if backend is None:
        return "nccl" if 0 < world_size <= gpus else "gloo"
    if backend not in ("gloo", "nccl"):
        raise LaunchConfigError(f"backend={backend!r} is not supported: use 'gloo' (CPUs) or 'nccl' (GPUs), "
                                "or None to choose")
    if backend == "nccl":
        if gpus == 0:
            raise LaunchConfigError("backend='nccl' needs GPUs and none is visible: use backend='gloo' "
                                    "(or None) to run on CPUs")
        if world_size > gpus:
            raise LaunchConfigError(
                f"world_size={world_size} needs {world_size} GPUs with NCCL (one per rank) "
                f"but {gpus} visible: use world_size<={gpus}, or backend='gloo' to run on CPUs")
    return backend


def check_world_size(world_size):
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise LaunchConfigError(f"world_size must be a whole number >= 1, got {world_size!r}")


def _defined_in_notebook(fn) -> bool:
    if getattr(fn, "__module__", None) != "__main__":
        return False
    main = sys.modules.get("__main__")
    code_file = getattr(getattr(fn, "__code__", None), "co_filename", "")
    return not getattr(main, "__file__", None) or "ipykernel" in code_file or code_file.startswith("<")


def check_spawnable(fn, args, start_method):
    name = getattr(fn, "__qualname__", repr(fn))
    if start_method == "fork":
        return
    if "<lambda>" in name or "<locals>" in name:
        raise NotebookWorkerError(
            f"worker {name!r} is a lambda or nested function, which the workers cannot import "
            "(under forkserver or spawn they import it by name): "
            "define it at the top level of a .py module and import it")
    if _defined_in_notebook(fn):
        raise NotebookWorkerError(
            f"worker {name!r} is defined in the notebook, which the workers cannot import "
            "(under forkserver or spawn they import it by name): "
            "move it into a .py module and import it (e.g. with %%writefile my_workers.py), "
            "or pass start_method='fork' (only while CUDA is not initialised in this kernel)")
    try:
        pickle.dumps((fn, args))
    except Exception as exc:  # noqa: BLE001
        raise NotebookWorkerError(
            f"cannot send worker {name!r} or its args to the workers ({exc}): "
            "pass module-level functions and plain data") from None


def _fork_poisoned() -> bool:
    """Would a forked child find CUDA unusable? Fork a no-op child and ask it.

    `torch.cuda.is_initialized()` misses the common case: a plain
    `torch.cuda.is_available()` already starts the CUDA driver, and torch then
    marks every forked child as a bad fork (seen on an H200: "Cannot
    re-initialize CUDA in forked subprocess"). Only a child can tell.
    """
    import torch
    if not torch.backends.cuda.is_built():
        return False
    pid = os.fork()
    if pid == 0:  # the child reads one flag and leaves at once
        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 1


def check_fork(start_method):
    if start_method != "fork":
        return
    import torch
    if torch.cuda.is_initialized() or _fork_poisoned():
        raise CudaForkError(
            "CUDA is already initialised in this process (even torch.cuda.is_available() does it), "
            "so forked workers cannot use it "
            "('Cannot re-initialize CUDA in forked subprocess'): use start_method='forkserver' "
            "(the default) or 'spawn' with the worker in a module, or restart the kernel and launch before "
            "anything touches CUDA")


def check_start_method(start_method):
    if start_method not in START_METHODS:
        raise LaunchConfigError(f"start_method={start_method!r}: use 'forkserver' (the default where the "
                                "platform has it), 'spawn' or 'fork'")


def check_timeout(timeout, name="timeout"):
    if timeout is None and name == "timeout":
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        if name == "timeout":
            raise LaunchConfigError(f"timeout={timeout!r}: use seconds > 0 for the run, or None for no deadline")
        raise LaunchConfigError(f"{name}={timeout!r}: use seconds > 0")
