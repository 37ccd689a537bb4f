"""Install torch the way PyTorch's install page says, without a CUDA build by surprise.

    python scripts/install_torch.py --spec torch==2.13.0 --index https://download.pytorch.org/whl/cpu

1. torch already importable (a CUDA build put there on a GPU box, say): left alone.
2. The index answers: `pip install SPEC --index-url INDEX`, PyTorch's own CPU
   wheel index (its install page's command), which serves only CPU builds.
3. The index does not answer (a machine that reaches only the package
   registries): pip is asked, dry, what SPEC would install from the sources it
   is configured with; a CPU build (no `nvidia-*` package among what it would
   install) is installed, a CUDA build is refused with what to do instead.

`make lab` and `make test` run it (Makefile variables TORCH and TORCH_INDEX).
Exit status 0 when torch is there afterwards, 1 when it refused.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

PROBE_S = 5


def torch_version() -> str | None:
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def reachable(index: str) -> bool:
    url = index.rstrip("/") + "/torch/"
    try:
        with urllib.request.urlopen(url, timeout=PROBE_S):
            return True
    except OSError:
        return False


def dry_run(spec: str) -> list[dict]:
    """What `pip install SPEC` would install here: [{name, version}, ...]."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
                        "--report", str(report), spec], check=True)
        items = json.loads(report.read_text())["install"]
    return [{"name": i["metadata"]["name"], "version": i["metadata"]["version"]} for i in items]


def is_cuda_build(plan: list[dict]) -> bool:
    torch = next((p for p in plan if p["name"].lower() == "torch"), None)
    cuda_deps = [p for p in plan if p["name"].lower().startswith(("nvidia-", "cuda-"))]
    return bool(cuda_deps) or (torch is not None and "+cu" in torch["version"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", default="torch==2.13.0", help="the torch requirement (Makefile: TORCH)")
    p.add_argument("--index", default="https://download.pytorch.org/whl/cpu",
                   help="PyTorch's wheel index for the build wanted (Makefile: TORCH_INDEX)")
    args = p.parse_args(argv)
    have = torch_version()
    if have:
        print(f"torch {have} is already installed: left as it is")
        return 0
    pip = [sys.executable, "-m", "pip", "install", args.spec]
    if reachable(args.index):
        print(f"installing {args.spec} from {args.index}", flush=True)
        return subprocess.run(pip + ["--index-url", args.index]).returncode
    print(f"{args.index} does not answer: asking pip what {args.spec} would install from its own sources", flush=True)
    plan = dry_run(args.spec)
    if is_cuda_build(plan):
        wanted = ", ".join(f"{p['name']} {p['version']}" for p in plan if p["name"].lower() in ("torch",)
                           or p["name"].lower().startswith("nvidia-"))
        print(f"refused: {args.spec} would install a CUDA build here ({wanted[:300]}...), several GB. "
              f"Make {args.index} reachable, point TORCH_INDEX at a mirror of it, or install the torch "
              f"build you want into .venv first (then run make again)", file=sys.stderr)
        return 1
    return subprocess.run(pip).returncode


if __name__ == "__main__":
    sys.exit(main())
