"""Modules past the size of one concern, printed by `make lint` as a warning (never a failure).

A module of one concern runs to a few hundred lines. Past LIMIT, it is worth a look; past SPLIT,
it most likely holds more than one concern and deserves a split by concern (not by line count:
a module cut only to fit a number is worse than a long one). docs/ARCHITECTURE.md says more.
"""

from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 600
SPLIT = 650


def sizes(package: Path) -> list[tuple[int, str]]:
    found = []
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > LIMIT:
            found.append((lines, str(path.relative_to(package.parent))))
    return found


def main(argv: list[str]) -> int:
    package = Path(argv[1] if len(argv) > 1 else Path(__file__).parents[1] / "nito_nb")
    for lines, name in sorted(sizes(package), reverse=True):
        advice = "deserves a split by concern" if lines > SPLIT else "worth a look"
        print(f"warning: {name} has {lines} lines (more than {LIMIT}): {advice}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
