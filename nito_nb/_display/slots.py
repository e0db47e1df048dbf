"""The one slot reconciler: rendered parts -> the outputs that show them, in order.

A live view shows its parts (``render_parts``) in outputs on the page: display handles for the
magic, ``ipywidgets.HTML`` children for the widget. ``Slots.reconcile(parts)`` keeps the mapping:

- a part already shown stays in its slot (re-sent only if it changed);
- finished answer blocks that appear in the same round share one slot (few messages per round
  even when a burst finishes hundreds of blocks); a slot of finished blocks is never sent again,
  which keeps the traffic linear in the answer length;
- a new part goes right after the part that precedes it in render order: usually the end, but a
  reasoning part that comes after the first answer text goes above the answer. A sink whose outputs
  can only be appended (IPython) re-sends the slots from that position on, shifted by one: this
  happens once per part kind at most, and it is what keeps reasoning above the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from itertools import count as count_from
from operator import is_not
from typing import Any

from .._render import Part, join_answer_blocks

__all__ = ["Slot", "Slots"]


def _final_answer(part: Part) -> bool:
    return part.final and part.key.startswith("answer-")


class Slot:
    """One output on the page (a display handle for the magic, an ``ipywidgets.HTML`` for the
    widget: ``view``), showing one part or a run of finished answer blocks.

    Finished blocks that appear in the same round share one output, so the messages per round stay
    few even when a burst finishes hundreds of blocks; a slot sent with only finished blocks is never
    sent again, which is what keeps the traffic linear. ``dirty`` marks a slot to send this round.
    """

    __slots__ = ("all_final_answer", "dirty", "keys", "parts", "view")

    def __init__(self, part: Part) -> None:
        self.keys = [part.key]
        self.parts = {part.key: part}
        self.view: Any = None
        self.dirty = True
        # Kept up to date rather than recomputed in can_absorb, which runs for every new block:
        # rescanning the slot there makes a burst of finished blocks quadratic.
        self.all_final_answer = _final_answer(part)

    def can_absorb(self, part: Part, after: str | None = None) -> bool:
        """Whether ``part`` may join this slot: only while the slot is sent this round anyway, only
        finished answer blocks, and (``after``) only right behind the part that precedes it."""
        return (
            self.dirty
            and self.all_final_answer
            and _final_answer(part)
            and (after is None or self.keys[-1] == after)
        )

    def add(self, part: Part) -> None:
        self.keys.append(part.key)
        self.parts[part.key] = part

    def replace(self, part: Part) -> None:
        self.parts[part.key] = part
        self._changed()

    def remove(self, key: str) -> None:
        self.keys.remove(key)
        del self.parts[key]
        self._changed()

    def _changed(self) -> None:
        # a changing slot is small
        self.all_final_answer = all(_final_answer(p) for p in self.parts.values())
        self.dirty = True

    def html(self) -> str:
        if len(self.keys) > 1 and self.all_final_answer:
            return join_answer_blocks([self.parts[key] for key in self.keys])
        return "".join(self.parts[key].html for key in self.keys)

    def bundle(self) -> dict[str, str]:
        if len(self.keys) == 1:
            part = self.parts[self.keys[0]]
            return {"text/html": part.html, "text/plain": part.plain or ""}
        # Answer blocks carry their own line ends: joined they are the Markdown source again (or,
        # past the head of a long answer, its share of the head and tail: _render/plain.py).
        return {
            "text/html": self.html(),
            "text/plain": "".join(self.parts[key].plain or "" for key in self.keys),
        }


class Slots:
    """The ordered slots of one live view (see the module docstring)."""

    def __init__(self) -> None:
        self.slots: list[Slot] = []
        self._slot_of: dict[str, Slot] = {}
        self._last: Sequence[Part] = ()  # the parts of the last call, in order

    def __iter__(self) -> Any:
        return iter(self.slots)

    def __len__(self) -> int:
        return len(self.slots)

    def __getitem__(self, index: int) -> Slot:
        return self.slots[index]

    @property
    def parts(self) -> list[Part]:
        return [slot.parts[key] for slot in self.slots for key in slot.keys]

    def reconcile(self, parts: Sequence[Part]) -> tuple[int | None, list[Slot]]:
        """Map ``parts`` onto the slots; mark the changed ones ``dirty``.

        Returns (the first position whose slot is new or moved, or None; the slots removed): the
        outputs from that position on show something else than before.
        """
        for known in self.slots:
            known.dirty = False
        moved: int | None = None
        prev: tuple[Slot, str] | None = None
        at = 0  # where a new part goes: right after the slot of the part before it
        slots = self.slots
        last = self._last
        index, count = 0, len(parts)
        while index < count:
            part = parts[index]
            if index < len(last) and last[index] is part:
                # A run of the very parts of the last call, in the same places (the finished
                # blocks a live view's cache hands back, thousands of them): nothing to do but
                # go on after their slot. Found at C speed: a loop over each of them was as long
                # as rendering the answer (bench/bench_display.py).
                end = next(
                    compress(count_from(index), map(is_not, parts[index:], last[index:])),
                    min(count, len(last)),
                )
                part = parts[end - 1]
                kept = self._slot_of[part.key]
                at = slots.index(kept) + 1
                prev = (kept, part.key)
                index = end
                continue
            index += 1
            slot = self._slot_of.get(part.key)
            if slot is not None:
                if slot.parts[part.key] is not part and slot.parts[part.key] != part:
                    slot.replace(part)
                # Parts come in slot order: their slot is the one at `at - 1` or at `at`.
                if at < len(slots) and slots[at] is slot:
                    at += 1
                elif not (at and slots[at - 1] is slot):
                    at = slots.index(slot) + 1
            elif prev is not None and prev[0].can_absorb(part, prev[1]):
                slot = prev[0]
                slot.add(part)
                self._slot_of[part.key] = slot
            else:
                slot = Slot(part)
                # A new output from here on (not at the end: the slots below move down one).
                moved = at if moved is None else min(moved, at)
                slots.insert(at, slot)
                self._slot_of[part.key] = slot
                at += 1
            prev = (slot, part.key)
        self._last = list(parts)  # a copy: a caller may reuse its list
        removed: list[Slot] = []
        # Every part's key is in _slot_of now: a key is gone only if there are more of them.
        gone = set(self._slot_of) - {p.key for p in parts} if len(self._slot_of) > count else ()
        for key in gone:  # the renderer never drops a part today; be robust if it ever does
            slot = self._slot_of.pop(key)
            slot.remove(key)
        for index in range(len(self.slots) - 1, -1, -1):
            if not self.slots[index].keys:
                removed.append(self.slots.pop(index))
                moved = index if moved is None else min(moved, index)
        return moved, removed
