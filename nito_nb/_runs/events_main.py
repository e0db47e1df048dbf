"""The store's events helper process (``_runs/events.py``): ``python -m nito_nb._runs.events_main``.

A module of its own so that ``-m`` runs it without a second copy of ``_events`` (the package
imports that one first)."""

import sys

from nito_nb._runs.events import main

if __name__ == "__main__":
    main(sys.argv)
