"""The engine's pure core: standard library only, no I/O, no thread of its own.

Everything here is a function of bytes, arrival times and counts, so every shell (the Stream, the
frame builder, the renderers, the capture) reads the protocol and computes a metric the same way.
``tests/test_architecture.py`` fails if a module here imports anything outside the standard
library. docs/ARCHITECTURE.md says where each rule lives.
"""
