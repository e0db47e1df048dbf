"""Scores: built-in graders for ``nito_nb.run(..., score={...})`` (docs/SCORES.md)."""

from .judge import judge

__all__ = ["judge"]
