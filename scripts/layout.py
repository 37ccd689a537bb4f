"""The package's layout as the README shows it, read from the package docstrings.

    python scripts/layout.py           print it
    python scripts/layout.py --write   put it into README.md, between its layout markers

One entry per package: its path, the first sentence of its docstring, and its
modules and subpackages. tests/repo/test_layout.py checks that the README holds
exactly this, so the README cannot drift from the code.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ddp_lessons"
README = ROOT / "README.md"
BEGIN = "<!-- layout: made by scripts/layout.py from the package docstrings -->"
END = "<!-- /layout -->"
ORDER = ("tool", "course", "cases")  # the homes, bottom up


def first_sentence(doc: str) -> str:
    text = " ".join(doc.split())
    m = re.match(r"(.+?\.)(\s|$)", text)
    return (m.group(1) if m else text).rstrip(".")


def _members(pkg: Path) -> list[str]:
    mods = sorted(p.stem for p in pkg.glob("*.py") if p.stem != "__init__")
    subs = sorted(d.name + "/" for d in pkg.iterdir() if (d / "__init__.py").exists())
    return mods + subs


def _key(pkg: Path):
    rel = pkg.relative_to(PACKAGE).parts
    return tuple(ORDER.index(p) if i == 0 and p in ORDER else len(ORDER) for i, p in enumerate(rel[:1])) + rel


def layout() -> str:
    pkgs = sorted((p.parent for p in PACKAGE.rglob("__init__.py")), key=_key)
    out = []
    for pkg in pkgs:
        rel = pkg.relative_to(PACKAGE.parent).as_posix() + "/"
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text())) or ""
        indent = "  " * (len(pkg.relative_to(PACKAGE).parts))
        out.append(f"{indent}{rel.split('/')[-2]}/  {first_sentence(doc)}")
        line = indent + "   "
        for name in _members(pkg):  # wrapped between names, never inside one
            if len(line) + len(name) + 3 > 104:
                out.append(line)
                line = indent + "   "
            line += " " + name if line.endswith("   ") and not line.strip() else " · " + name
        out.append(line)
    return "\n".join("    " + line for line in out)


def readme_block(text: str) -> str:
    """What the README holds between its layout markers (without them)."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


def main() -> None:
    block = layout()
    if "--write" in sys.argv:
        text = README.read_text()
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
        README.write_text(text[:start] + "\n\n" + block + "\n\n" + text[end:])
    else:
        print(block)


if __name__ == "__main__":
    main()
