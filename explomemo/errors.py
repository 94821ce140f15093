"""The one exception family of explomemo.

Every error a user or an agent can cause is an :class:`ExplomemoError` whose
message says what was wrong, with which input, and what to do. The CLI turns
them into exit code 2 and one line on stderr; the MCP server into a tool error.
"""

from __future__ import annotations


class ExplomemoError(Exception):
    """Base class of every error explomemo reports to its caller."""


class InputError(ExplomemoError):
    """A parameter broke one of the rules of docs/reference.md (length, count, range)."""


class PathError(InputError):
    """A file or root was refused: outside root, missing, not a regular file, too large."""


class NotFoundError(ExplomemoError):
    """A memo id that does not exist (in that project), or a project without memos."""


class StoreError(ExplomemoError):
    """The database cannot be opened, read or written."""


class NoDatabaseError(StoreError):
    """No database at the path yet (or one being created): nothing was recorded there.

    For a command that only reads, an error to report; for a hook, nothing to say."""


class ExportFileError(ExplomemoError):
    """An export file (JSON Lines) cannot be read or is malformed."""


class ModelError(ExplomemoError):
    """The embedding model named by the environment cannot be loaded."""


class SetupError(ExplomemoError):
    """A client's configuration cannot be merged (not valid JSON or TOML, misshapen, or
    reached through a link that leads out of the project folder)."""


class HookInputError(ExplomemoError):
    """The JSON a Claude Code hook read on stdin is not what Claude Code sends."""


class DeadlineError(ExplomemoError):
    """A hook reached the deadline it keeps within the time its client gives it: it stopped
    its work, and adds nothing."""


class TranscriptError(ExplomemoError):
    """The transcript a Stop hook is given cannot be read (missing, not a regular file)."""


class OutputError(ExplomemoError):
    """Standard output cannot be written: a full disk, or a reader that has gone
    (``reader_gone``: a closed pipe, which a command leaves without a message)."""

    def __init__(self, text: str, *, reader_gone: bool = False) -> None:
        super().__init__(text)
        self.reader_gone = reader_gone
