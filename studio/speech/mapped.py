"""Text that remembers where each of its characters came from in the producer's script.

Markup is removed and numbers are rewritten before the text reaches a voice, but word timings must point into the
script the producer wrote (the UI highlights the word being spoken). ``MappedText`` carries, for every character,
the span of the source text it stands for; a rewrite maps all of its new characters to the span it replaced.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class MappedText:
    text: str
    src_start: tuple[int, ...]  # per character: first source character it stands for
    src_end: tuple[int, ...]  # per character: one past the last source character it stands for

    @staticmethod
    def of(text: str, offset: int = 0) -> MappedText:
        """``text`` as the source itself, its first character at ``offset`` in the source."""
        idx = tuple(range(offset, offset + len(text)))
        return MappedText(text, idx, tuple(i + 1 for i in idx))

    def __len__(self) -> int:
        return len(self.text)

    def slice(self, start: int, end: int) -> MappedText:
        return MappedText(self.text[start:end], self.src_start[start:end], self.src_end[start:end])

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """Source span of the characters ``start:end`` (an empty range maps to an empty span at its place)."""
        if not self.text:
            return (0, 0)
        if end <= start:
            i = min(start, len(self.text) - 1)
            return (self.src_start[i], self.src_start[i])
        return (min(self.src_start[start:end]), max(self.src_end[start:end]))

    def __add__(self, other: MappedText) -> MappedText:
        return MappedText(self.text + other.text, self.src_start + other.src_start, self.src_end + other.src_end)

    def sub(self, pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str | None]) -> MappedText:
        """Replace every match of ``pattern`` by ``repl(match)`` (None leaves the match as it is)."""
        texts: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        last = 0
        changed = False
        for m in pattern.finditer(self.text):
            new = repl(m)
            if new is None:
                continue
            changed = True
            texts.append(self.text[last:m.start()])
            starts.extend(self.src_start[last:m.start()])
            ends.extend(self.src_end[last:m.start()])
            s, e = self.source_span(m.start(), m.end())
            texts.append(new)
            starts.extend([s] * len(new))
            ends.extend([e] * len(new))
            last = m.end()
        if not changed:
            return self
        texts.append(self.text[last:])
        starts.extend(self.src_start[last:])
        ends.extend(self.src_end[last:])
        return MappedText("".join(texts), tuple(starts), tuple(ends))

    def strip(self) -> MappedText:
        """Without leading and trailing whitespace."""
        text = self.text
        start = len(text) - len(text.lstrip())
        end = len(text.rstrip())
        return self.slice(start, max(start, end))
