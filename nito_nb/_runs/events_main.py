"""The store's events helper process (``_runs/events_helper.py``): ``python -m nito_nb._runs.events_main``.

A module of its own so that ``-m`` runs it without a second copy of ``events_helper`` (the package
imports that one first)."""

import sys

from nito_nb._runs.events_helper import main

if __name__ == "__main__":
    main(sys.argv)
