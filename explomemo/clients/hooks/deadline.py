"""When a hook stops reading files: within the timeout ``setup`` gives it, so that it ends
with one line rather than being killed half-way."""

from __future__ import annotations

import time
from collections.abc import Callable

from explomemo.errors import DeadlineError


class Deadline:
    """The moment a hook stops its work, ``seconds`` after it was made, so that it ends
    within the time its client gives it rather than being killed half-way. ``clock`` is
    read at each question (tests pass one that moves as they choose)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._at = clock() + seconds

    def passed(self) -> bool:
        """Whether the deadline has come."""
        return self._clock() >= self._at

    def reading(self, done: int, total: int) -> None:
        """The progress of a stale check (see :data:`~explomemo.check.validity.Progress`):
        :class:`~explomemo.errors.DeadlineError` when the deadline has come with files
        still to read."""
        if done < total and self.passed():
            raise DeadlineError(
                f"the memos' files were not all checked by the hook's {self.seconds:g} s"
                f" deadline ({done:,} of {total:,} read): it adds nothing this time;"
                " `explomemo stale` checks them all"
            )
