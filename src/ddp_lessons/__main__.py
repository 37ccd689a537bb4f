"""`python -m ddp_lessons ...`; see ddp_lessons.cli."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
