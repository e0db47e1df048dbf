"""Moved to :mod:`nito_nb._core.errors`. This name stays only so that modules of the display
layer written before the move imported it (they now import ``_core.errors``);
new code imports ``nito_nb._core.errors`` (or the names from ``nito_nb``)."""

from ._core.errors import *  # noqa: F403
from ._core.errors import __all__  # noqa: F401
