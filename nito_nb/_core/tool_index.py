"""Which tool call a fragment belongs to: the one rule, used by the accumulator (which assembles
the calls) and the frame builder (which numbers each fragment's row)."""

from __future__ import annotations

from typing import Any

__all__ = ["ToolIndexer"]


class ToolIndexer:
    """The call index of each tool-call fragment of one stream, in arrival order.

    A fragment with an integer ``index`` belongs to that call. Some gateways send whole calls
    without an index: then a new id starts a new call (after the highest index so far), and a
    fragment without id, or with the id of a known call, continues that call (the last one when
    it has no id).
    """

    __slots__ = ("ids",)

    def __init__(self) -> None:
        self.ids: dict[int, str | None] = {}  # call index: its id once known

    def index(self, fragment: dict[str, Any]) -> int:
        index = fragment.get("index")
        fragment_id = fragment.get("id")
        if not isinstance(index, int):
            known = self.ids
            if known and (not fragment_id or fragment_id in known.values()):
                if fragment_id:
                    index = next(i for i in sorted(known) if known[i] == fragment_id)
                else:
                    index = max(known)
            else:
                index = max(known, default=-1) + 1
        if index not in self.ids:
            self.ids[index] = None
        if fragment_id and self.ids[index] is None:
            self.ids[index] = fragment_id
        return index
