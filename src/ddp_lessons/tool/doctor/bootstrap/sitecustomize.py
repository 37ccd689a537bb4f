"""Put first on PYTHONPATH by `python -m ddp_lessons doctor` in the processes it starts (and their
children: torchrun's ranks, Lightning's re-run script): once `torch` is imported, the doctor's
recorder is installed in this process (`ddp_lessons.tool.doctor.inject`). Without the doctor's
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
                from ddp_lessons.tool.doctor import inject
                inject.install()
            spec.loader.exec_module = exec_module
            return spec
    sys.meta_path.insert(0, Finder())


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
