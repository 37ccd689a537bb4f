"""Put first on PYTHONPATH by `python -m ddp_lessons doctor` in the processes it starts (and their
children: torchrun's ranks, Lightning's re-run script): once `torch` is imported, the doctor's
rank half is installed in this process (`ddp_lessons.tool.doctor.rank.inject`). Without the doctor's
environment variable it does nothing. Any other sitecustomize on the path runs after it, as it would have.
"""

import os
import sys


def _after_torch():
    import importlib.abc
    import importlib.util

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                try:   # never the script's failure: a process the doctor cannot time runs as it would
                    _inject().install()
                except Exception as exc:  # noqa: BLE001
                    sys.stderr.write(f"ddp-lessons doctor: this process is not timed ({type(exc).__name__}: "
                                     f"{exc})\n")
            spec.loader.exec_module = exec_module
            return spec
    sys.meta_path.insert(0, Finder())


def _inject():
    """The doctor's rank half (`ddp_lessons.tool.doctor.rank.inject`), loaded by its path under its own
    name: importing the package here could meet a script that is importing it itself at this moment."""
    import importlib.util
    name = "ddp_lessons.tool.doctor.rank.inject"
    if name in sys.modules:
        return sys.modules[name]
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "ddp_lessons", "tool", "doctor", "rank", "inject.py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        cand = os.path.join(os.path.abspath(entry or "."), "sitecustomize.py")
        if os.path.dirname(cand) != here and os.path.isfile(cand):
            with open(cand) as f:
                code = compile(f.read(), cand, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": cand})
            return


if os.environ.get("DDP_LESSONS_DOCTOR_DIR"):
    _after_torch()
_chain()
