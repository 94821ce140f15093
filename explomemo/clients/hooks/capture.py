"""Capture: the Stop hook records a turn that answered a question about the code itself.

(The SubagentStop hook builds a delegated run's memo with :func:`capture_of` too, and both
store it with :func:`store_capture`.)

The rule (:func:`should_capture`) is a pure function of the prompt and a few
facts about the turn (:class:`TurnFacts`), so the labelled turns of
``benchmarks/capture/`` measure exactly what the hook runs. A turn is captured
when:

* what the user typed (:func:`typed`: without an IDE's or an app's blocks before it)
  asks about the code (:func:`asks`: a question, or a request to explain, find, show how,
  walk through, tell about; not a task anywhere in it, a check, advice, speculation, an
  opinion, debugging of a run, an issue or pull request, a slash command, a role prompt)
  and stands on its own
  (:func:`stands_alone`: not "why?", "and the other one?", "what about the CLI?",
  nor "this"/"these"/"those" in a short prompt with nothing they could point to);
* it read at least one file inside the root with the Read tool;
* it changed no file (no Edit, Write, MultiEdit or NotebookEdit call);
* it delegated no work to a subagent (an Agent or Task call): the delegated run is
  captured as a memo of its own (:mod:`explomemo.clients.hooks.subagent_stop`);
* it recorded no memo, and no fresh memo was served to it (the prompt hook's
  context naming a fresh memo, or a recall or show answer with a fresh memo
  whole): that memo exists already;
* neither its prompt nor its answer is marked private (:func:`private`: ``<private>`` in
  any spelling of the tag).

The memo (:func:`capture_of`): what the user typed as question, the turn's final text as
conclusion, each with its secrets redacted (:mod:`explomemo.redaction`), the files read as
its files, each hashed as the agent read it (:func:`read_file_row`), cut to the limits of a
record with the cut said. A file that holds secrets (:func:`~explomemo.redaction.secret_file`)
keeps its SHA-256 and no snapshot. Its texts follow the input rule of a record: a NUL is
dropped and a lone surrogate becomes U+FFFD (:func:`~explomemo.inputs.cleaned`). Hashing
stops at the hook's deadline.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from explomemo import inputs
from explomemo.errors import DeadlineError, PathError
from explomemo.files import Opener, Refused, Root, relative_path
from explomemo.store.pending import Capture, CapturedFile

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from explomemo.clients.hooks.deadline import Deadline
    from explomemo.store.database import Store

#: The switch of the environment that turns capture off.
CAPTURE_SWITCH = "EXPLOMEMO_CAPTURE"
#: Longer prompts are pasted logs or files, not a question: the rule reads none of them.
MAX_PROMPT = 20_000
#: Words a prompt needs at least to stand on its own ("why?" does not).
MIN_WORDS = 3
#: Below this many words, "this", "these" or "those" must point at something in the prompt.
SHORT_PROMPT_WORDS = 20
#: What a cut text ends with.
CUT_MARK = "\n[… cut by explomemo: {kept:,} of {total:,} characters kept]"


class TurnFacts(NamedTuple):
    """What the rule needs to know of a turn besides its prompt."""

    #: Successful Read calls on files inside the root.
    reads: int
    #: An Edit, Write, MultiEdit or NotebookEdit call was made.
    edits: bool
    #: The turn recorded a memo (the record tool, or ``explomemo record`` through Bash).
    recorded: bool
    #: A fresh memo was served to the turn whole.
    answered_from_fresh_memo: bool
    #: The turn delegated work to a subagent (an Agent or Task call): what it explored is
    #: the subagent's memo (see :mod:`explomemo.clients.hooks.subagent_stop`).
    delegated: bool = False


# The prompt rule -----------------------------------------------------------

# \w, not a class of Unicode ranges: the hook compiles its patterns at each start, and
# a large class costs milliseconds to compile.
_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")
#: Kana, CJK ideographs and Hangul: scripts written without spaces, one word a character.
_UNSPACED = ((0x3040, 0x30FF), (0x3400, 0x9FFF), (0xAC00, 0xD7AF))
_CODE_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
#: Words that open a question.
_INTERROGATIVES = frozenset(
    "what what's whats where where's wher when when's why how how's which who whose whom"
    " is are does do did can could would will was were has have if".split()
)
#: Openings that ask for an explanation without a question mark.
_REQUESTS = re.compile(
    r"^(?:(?:can|could|would) you (?:please )?|please |pls )?"
    r"(?:explain|describe|summari[sz]e how|tell me|show me (?:how|where|what|which|why)"
    r"|walk me through|help me understand|find (?:out )?(?:where|how|what|which|who|when)"
    r"|check (?:how|why|where|what)|give (?:me )?an overview|q:|question:"
    r"|/explain\b|(?:do|give|write) me a summary"
    r"|i(?: want| need| would like|'d like) to (?:understand|know))",
)
#: A question or request inside a longer prompt ("I'll do it. Q: …").
_INNER_QUESTION = re.compile(r"(?:^|\n|\. )(?:q|question):", re.IGNORECASE)
#: Asks for work, a review, a plan or advice, not how the code is.
_NOT_ABOUT_THE_CODE = re.compile(
    r"\b(?:review|plan|propose|proposal|brainstorm|estimate|should (?:we|i)|best way"
    r"|what needs to change|needs to change|double[- ]check|did (?:we|i|you)"
    r"|(?:is|are) now|show me the"
    # advice and comparisons
    r"|is there (?:a|any) (?:good )?reason|would we handle|compare|gaps?"
    # work done earlier in the session
    r"|we did|prior things|still (?:working|works?)"
    # a run seen somewhere: local debugging, reports
    r"|on my machine|we got a report"
    # what is worth doing, easier or better: advice, not how the code is
    r"|worth|easy to|easier|straightforward|better to|^should|should (?:we|i|there|it|this)"
    r"|wouldn't|would it (?:be|make)|how (?:can|could|would|should) we"
    # an opinion or an impression to discuss, the assistant's included
    r"|^i (?:feel|have|wonder|guess|believe|don't|dont)|(?:^|[.?!] )i think"
    r"|i (?:suspect|heard|agree)|do you think|thoughts on|your (?:opinion|thoughts)"
    r"|are you able|^would (?!you\b)"
    # a run the user sees go wrong: local debugging
    r"|i (?:can ?not|can't|cannot|do not|don't|dont) (?:see|get|connect|find|run)"
    r"|(?:do|can|did) i not)\b"
    # an issue, a pull request or a review comment: work outside the code
    r"|/(?:issues|pull|pulls)/\d|#discussion_r"
)
#: A slash command (a skill, a workflow) runs what it says, not the question in its arguments.
_COMMAND = re.compile(r"<command-name>/(?!explain\b)")
#: A block an IDE, an app or a client puts before what the user typed
#: (``<ide_opened_file>…</ide_opened_file>``, ``<system_instruction>…``): a tag whose name
#: joins words with ``_`` or ``-``, as a person's HTML or pasted XML (``<b>``, ``<db>``)
#: seldom does; not a command's. Possessive: one way to read a tag, so a long one costs
#: its length once.
_PREAMBLE = re.compile(r"\s*+<(?!command-)(?=[\w-]*[_-])([\w-]++)(?:\s[^>]*+)?>.*?</\1>", re.DOTALL)
#: What opens a prompt no person typed as a question: a tag left after the preambles, an
#: agent's role ("You are a … analyst"), a numbered list of requests.
_NOT_TYPED = re.compile(r"^(?:<(?!command-message>)[\w-]+|you are (?:a|an|the)\b|\d+[.)] )")
#: "Can you check …" asks for a check (a review, a verification) unless it asks how the code
#: is ("check how …").
_CHECK = re.compile(r"check (?!how\b|why\b|where\b|what\b|when\b|which\b)")
#: Imperatives that ask for a change or an action.
_TASKS = frozenset(
    "fix add implement refactor write create update change remove delete make rename run"
    " commit push merge review plan examine analyze analyse look go continue do build test"
    " install move convert port clean improve optimize optimise let's lets rewrite"
    " generate bump revert undo redo try use replace edit modify draft prepare sweep".split()
)
#: A polite opening before the verb that says what is asked ("can you fix …", "can we
#: sweep …" are tasks).
_POLITE_OPENING = (
    r"(?:(?:can|could|would|will|shall) (?:you|u|we) (?:please )?(?:also )?|please |pls )"
)
_POLITE = re.compile(rf"^{_POLITE_OPENING}")
#: A sentence asking for work, anywhere in the prompt ("… did not work. Can we test …?"),
#: found in the prompt with its line breaks kept.
_ASKS_FOR_WORK = re.compile(rf"(?:^|[.?!:;] |\n ?)(?:{_POLITE_OPENING}|let's |lets )(\w+)")
#: White space but line breaks.
_SPACES = re.compile(r"[^\S\n]+")
#: "Have a look at …": an imperative, though its first word opens questions too.
_LOOK = re.compile(r"(?:have|take) a (?:look|peek)\b")
#: Openings of a reply to what came before.
_FOLLOW_UPS = frozenset(
    "and but so also then ok okay yes yeah yep no nope wait hmm doesn't don't isn't"
    " aren't wasn't same else seems not alright practically thoughts".split()
)
_FOLLOW_UP_PHRASES = re.compile(
    r"^(?:what about|how about|and what|why not|what else|before we continue)\b"
    r"|^(?:can|could) (?:you|we) also\b"
)
#: Openings that point back at what was said before ("it was supposed to…").
_BACK_REFERENCES = frozenset({"it", "that", "they"})
_DEICTIC = frozenset({"this", "these", "those"})
#: Something a "this" can point at inside the prompt: code, a file, a quoted name.
_REFERENT = re.compile(r"```|`[^`]+`|@\S|\S/\S|\b\w+\.\w{1,5}\b")


def _words(text: str) -> list[str]:
    return [w.replace("\u2019", "'") for w in _WORD.findall(text.lower())]


def asks(prompt: str) -> bool:
    """Whether the prompt asks how the code is: a question, or a request to explain or find."""
    text = _CODE_FENCE.sub(" ", prompt).strip()
    lowered = " ".join(text.lower().split())
    if _NOT_ABOUT_THE_CODE.search(lowered) or _COMMAND.search(lowered):
        return False
    if _NOT_TYPED.match(lowered):
        return False
    words = _words(text)
    if not words:
        return False
    first = words[0]
    asked = _POLITE.match(lowered)
    verb = _words(lowered[asked.end() :])[:1] if asked else [first]
    after = asked.end() if asked else 0
    if (verb and verb[0] in _TASKS) or _LOOK.match(lowered, after):
        return False
    if _CHECK.match(lowered, after) or (asked and lowered.startswith("find out if", after)):
        return False
    sentences = _SPACES.sub(" ", text.lower())
    if any(found.group(1) in _TASKS for found in _ASKS_FOR_WORK.finditer(sentences)):
        return False
    if "?" in text or "\uff1f" in text or _INNER_QUESTION.search(text):
        return True
    return first in _INTERROGATIVES or _REQUESTS.match(lowered) is not None


def _counted(words: list[str]) -> int:
    """How many words: a run of an unspaced script counts a word a character."""
    return sum(
        len(word) if any(low <= ord(word[0]) <= high for low, high in _UNSPACED) else 1
        for word in words
    )


def stands_alone(prompt: str) -> bool:
    """Whether the prompt makes sense without the conversation before it."""
    words = _words(prompt)
    if _counted(words) < MIN_WORDS:
        return False
    lowered = " ".join(prompt.lower().split())
    if words[0] in _FOLLOW_UPS or words[0] in _BACK_REFERENCES:
        return False
    if _FOLLOW_UP_PHRASES.match(lowered):
        return False
    if _counted(words) < SHORT_PROMPT_WORDS and _DEICTIC.intersection(words):
        return _REFERENT.search(prompt) is not None
    return True


def typed(prompt: str) -> str:
    """What the user typed: the prompt without the blocks an IDE or an app put before it."""
    end = 0
    while found := _PREAMBLE.match(prompt, end):
        end = found.end()
    return prompt[end:].strip()


#: The private tag once its text is normalised: opening, closing or empty, with attributes,
#: spaces or line breaks inside; not ``<privateer>`` nor ``<private-key>``.
_PRIVATE_TAG = re.compile(
    r"<\s*/?\s*p\s*r\s*i\s*v\s*a\s*t\s*e(?![\w-])[^<>]{0,200}>", re.IGNORECASE
)
#: Characters that hide inside a tag without showing: zero-width spaces and joiners, word
#: joiner, byte-order mark, soft hyphen.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"))
#: Angle brackets NFKC leaves as they are.
_ANGLES = str.maketrans("\u2039\u203a\u27e8\u27e9\u3008\u3009", "<><><>")


def private(text: str) -> bool:
    """Whether ``text`` is marked private: the tag ``<private>`` in any of its spellings
    (``<private/>``, ``</private>``, ``<private reason="x">``, ``< private >``, any case,
    full-width, HTML-escaped, split by a line break or a zero-width character)."""
    import html
    import unicodedata

    seen = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_ANGLES)
    for _ in range(3):  # "&amp;lt;private&amp;gt;" is escaped twice
        seen, before = html.unescape(seen), seen
        if seen == before:
            break
    return _PRIVATE_TAG.search(seen) is not None


def should_capture(prompt: str, turn: TurnFacts) -> bool:
    """The rule: whether the Stop hook records this turn itself (see the module's text)."""
    if private(prompt):
        return False
    if turn.reads < 1 or turn.edits or turn.recorded or turn.answered_from_fresh_memo:
        return False
    if turn.delegated:
        return False
    if len(prompt) > MAX_PROMPT:
        return False
    text = typed(prompt)
    return asks(text) and stands_alone(text)


def capture_enabled(env: Mapping[str, str]) -> bool:
    """False when ``EXPLOMEMO_CAPTURE=off`` (or 0, false, no)."""
    return inputs.switched_on(env, CAPTURE_SWITCH)


# The memo -------------------------------------------------------------------


class ReadResult(NamedTuple):
    """One Read call's result as the transcript holds it (``toolUseResult.file``)."""

    path: str
    #: The lines returned, joined by "\n"; None when the transcript lacks them.
    content: str | None
    start_line: int


def cut(text: str, limit: int) -> str:
    """``text`` (trimmed) within ``limit`` characters: when longer, its first characters and
    a last line that says how many of how many were kept."""
    text = text.strip()
    if len(text) <= limit:
        return text
    kept = limit
    while len(CUT_MARK.format(kept=kept, total=len(text))) + kept > limit:
        kept -= 1
    return text[:kept] + CUT_MARK.format(kept=kept, total=len(text))


def capture_of(
    *,
    project: str,
    root: Root,
    question: str,
    conclusion: str,
    reads: Sequence[ReadResult],
    recorded_at: str,
    snapshots: bool,
    deadline: Deadline | None = None,
    origin: str = inputs.TRANSCRIPT,
    agent_type: str | None = None,
    cost_tokens: int | None = None,
) -> Capture | None:
    """The memo of a captured turn, its secrets redacted; None when its answer is marked
    private (:func:`private`), none of its files can be recorded, or its question or
    conclusion holds nothing once cleaned.

    Files are read and hashed one at a time; before each, ``deadline`` is asked whether
    it has passed, and when it has, :class:`~explomemo.errors.DeadlineError` says how many
    were hashed: a memo resting on fewer files than its turn read could pass as fresh when
    one it leaves out changes.

    ``origin`` is ``subagent`` for a delegated run (see
    :mod:`explomemo.clients.hooks.subagent_stop`), whose ``agent_type`` is cleaned and cut to
    :data:`~explomemo.inputs.MAX_AGENT_TYPE`; ``cost_tokens`` is kept as given."""
    if private(conclusion):
        return None
    from explomemo.redaction import redact, secret_file

    # Redacted before the cut: a secret cut in half would no longer be found.
    question = cut(redact(inputs.cleaned(question)).text, inputs.MAX_QUESTION)
    conclusion = cut(redact(inputs.cleaned(conclusion)).text, inputs.MAX_CONCLUSION)
    if not question or not conclusion:
        return None
    by_file: dict[str, list[ReadResult]] = {}
    for read in reads:
        try:
            rel = relative_path(root, read.path, "file")
        except PathError:
            continue
        by_file.setdefault(rel, []).append(read)
    if not by_file:
        return None
    files: list[CapturedFile] = []
    kept: list[tuple[str, str, bytes]] = []
    with Opener(root) as opener:
        for done, (rel, results) in enumerate(by_file.items()):
            if deadline is not None and deadline.passed():
                total = min(len(by_file), inputs.MAX_FILES)
                raise DeadlineError(
                    f"the turn's memo was not captured: {done} of {total} files hashed by"
                    f" the hook's {deadline.seconds:g} s deadline, when it stopped; nothing"
                    " was stored or kept for later: record the memo with"
                    " memory_exploration_record if the turn answered a question"
                )
            row = read_file_row(opener, rel, results)
            if row is None:
                continue
            found, content = row
            files.append(found)
            if snapshots:
                from explomemo.changes.contents import SNAPSHOT_MAX_BYTES, compress

                if len(content) <= SNAPSHOT_MAX_BYTES and not secret_file(rel, content):
                    kept.append((found.sha256, *compress(content)))
            if len(files) == inputs.MAX_FILES:
                break
    if not files:
        return None
    return Capture(
        project=project,
        question=question,
        conclusion=conclusion,
        root=root.path,
        recorded_at=recorded_at,
        files=files,
        snapshots=kept,
        origin=origin,
        agent_type=None
        if agent_type is None
        else cut(inputs.cleaned(agent_type), inputs.MAX_AGENT_TYPE),
        cost_tokens=cost_tokens,
    )


def read_file_row(
    opener: Opener, rel: str, reads: Sequence[ReadResult]
) -> tuple[CapturedFile, bytes] | None:
    """A file as the agent read it, with the bytes to keep as its snapshot.

    When every line each Read returned is still in the file where it was read, the
    file's SHA-256 now. Otherwise (changed between the Read and the Stop, or gone)
    the memo is born stale for it: its recorded content is the file as the agent
    saw it, the lines each Read returned put in place of the lines now there (the
    whole Read's text for a file that is gone), hashed; so a diff shows what
    changed, and the file is never fresh. None for a file that is not a regular
    file, or too large to record.
    """
    import hashlib

    import xxhash

    from explomemo.check.hashing import git_blob_id

    try:
        current = _current_bytes(opener, rel)
    except Refused:
        return None  # a FIFO, a directory, a link out of root: record refuses it too
    if current is not None and len(current) > inputs.MAX_FILE_BYTES:
        return None
    seen = _as_read(current, reads)
    data = current if seen is None else seen
    if data is None:
        return None
    row = CapturedFile(
        path=rel,
        sha256=hashlib.sha256(data).hexdigest(),
        xxh3=xxhash.xxh3_128_hexdigest(data),
        size=len(data),
        git_blob=git_blob_id(data),
    )
    return row, data


def _current_bytes(opener: Opener, rel: str) -> bytes | None:
    """The file's bytes now (at most one byte past the limit); None when it is gone. Raises
    :class:`Refused` for one that is there but not a regular file inside the root."""
    try:
        fd, _ = opener.open(rel)
    except Refused as exc:
        if exc.missing:
            return None
        raise
    try:
        chunks: list[bytes] = []
        left = inputs.MAX_FILE_BYTES + 1
        # All that is left at once: a regular file gives it in one read, kept as it is.
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _as_read(current: bytes | None, reads: Iterable[ReadResult]) -> bytes | None:
    """The file as the agent saw it, when that differs from ``current``; None when every
    line each Read returned matches the file now.

    Only the lines from the first one a Read returned are split (a Read returns at most a
    few thousand of a file's lines): a file of millions of short lines is not held as
    millions of objects."""
    if current is None:
        texts = [r.content for r in reads if r.content is not None]
        return "\n".join(texts).encode() if texts else None
    spans = [
        (max(read.start_line, 1) - 1, read.content.split("\n"))
        for read in reads
        if read.content is not None  # an image, a PDF: no lines to check
    ]
    if not spans:
        return None
    first, offset = _line_start(current, min(start for start, _ in spans))
    last = max(start + len(returned) for start, returned in spans)
    found, end = _line_start(current, last)
    # The lines from the first a Read returned to the last (and the rest, unsplit, after
    # the line break that ends it); to the end when the file has no more.
    end = end - 1 if found == last else len(current)
    lines = current[offset:end].split(b"\n")
    changed = False
    for start, returned in spans:
        at = start - first
        now = lines[at : at + len(returned)]
        # The Read tool gives lines as text, without a carriage return.
        if [line.removesuffix(b"\r").decode("utf-8", "replace") for line in now] != returned:
            changed = True
            lines[at : at + len(returned)] = [line.encode() for line in returned]
    if not changed:
        return None
    whole = memoryview(current)  # its slices are not copies: the file is copied once
    return b"".join((whole[:offset], b"\n".join(lines), whole[end:]))


#: What :func:`_line_start` counts line breaks in at a time.
_COUNT_BYTES = 1 << 16


def _line_start(data: bytes, line: int) -> tuple[int, int]:
    """(Number, byte offset) of line ``line`` (from 0) of ``data`` split at line breaks, or
    of its last line when it has fewer: line breaks are counted a block at a time, and
    looked for one by one only in the block where the line starts."""
    found = offset = 0
    while found < line:
        end = min(len(data), offset + _COUNT_BYTES)
        breaks = data.count(b"\n", offset, end)
        if found + breaks < line and end < len(data):
            found, offset = found + breaks, end
            continue
        while found < line and (at := data.find(b"\n", offset, end)) >= 0:
            found, offset = found + 1, at + 1
        break
    return found, offset


#: A line of a Read result as the model is given it: its number, a tab (an arrow in
#: older releases), the line.
_NUMBERED = re.compile(r" *(\d+)(?:\t|\u2192)")


def numbered_results(calls: Sequence[tuple[str, str]]) -> list[ReadResult]:
    """The results of a delegated run's successful Read calls, from their (file_path, text
    the model was given) (see :class:`explomemo.clients.hooks.transcripts.Run`).

    A subagent's transcript keeps no ``toolUseResult``: the lines are read off the text,
    each ``N<tab>line``, numbered on from the first; what follows the last numbered line (a
    reminder Claude Code adds) is not the file's. A text without a numbered first line (an
    empty file, an image) has no lines to check."""
    found: list[ReadResult] = []
    for path, text in calls:
        lines: list[str] = []
        start = 1
        for line in text.split("\n"):
            number = _NUMBERED.match(line)
            if number is None or (lines and int(number.group(1)) != start + len(lines)):
                break
            if not lines:
                start = int(number.group(1))
            lines.append(line[number.end() :])
        content = "\n".join(lines) if lines else None
        found.append(ReadResult(path=path, content=content, start_line=start))
    return found


def read_results(calls: Sequence[tuple[str, Any]]) -> list[ReadResult]:
    """The results of a turn's successful Read calls, from their (file_path, toolUseResult)
    (see :class:`explomemo.clients.hooks.transcripts.Turn`)."""
    found: list[ReadResult] = []
    for path, result in calls:
        file = result.get("file") if isinstance(result, dict) else None
        file = file if isinstance(file, dict) else {}
        content = file.get("content")
        start = file.get("startLine")
        found.append(
            ReadResult(
                path=path,
                content=content if isinstance(content, str) else None,
                start_line=start if isinstance(start, int) and not isinstance(start, bool) else 1,
            )
        )
    return found


def store_capture(
    found: Capture,
    root: str,
    db: Path | None,
    replacing: int | None = None,
    handed: Sequence[int] = (),
) -> None:
    """Store a captured memo, or, when the database cannot take it within
    :data:`~explomemo.clients.hooks.memos.BUSY_TIMEOUT_MS`, keep it in the pending file
    beside it (then raise, so the hook says where it waits). A delegated run asked to
    check memo ``replacing`` replaces it (see
    :meth:`~explomemo.store.database.Store.save_capture`); a memo kept in the
    pending file is stored later as any capture. A run that was ``handed`` memos (checked,
    or as a head start) built on them: its memo rests also on their files it did not read
    again, as they recorded them (:func:`_with_handed_files`)."""
    from explomemo.changes.gitrepo import repository_identity
    from explomemo.clients.hooks.memos import BUSY_TIMEOUT_MS
    from explomemo.errors import StoreError
    from explomemo.store import pending
    from explomemo.store.database import Store, database_path

    try:
        store = Store.open(db, busy_timeout_ms=BUSY_TIMEOUT_MS)
        try:
            found = found._replace(repository=repository_identity(root, store))
            with store.errors(), store.write() as conn:
                found = _with_handed_files(store, conn, found, handed)
                if replacing is None or store.save_capture(conn, found, replacing) is None:
                    store.save_capture(conn, found)
        finally:
            store.close()
    except StoreError as exc:
        if found.repository is None:
            found = found._replace(repository=repository_identity(root))
        kept = pending.keep(database_path(db), found)
        raise StoreError(
            f"{exc} -- the memo waits in {kept}, stored by the next explomemo that"
            " writes to the database"
        ) from None


def _with_handed_files(
    store: Store, conn: sqlite3.Connection, found: Capture, handed: Sequence[int]
) -> Capture:
    """``found`` resting also on the files of the ``handed`` memos that its run did not
    read, each as that memo recorded it (so a change to one makes the memo stale, as it
    would the handed one), within :data:`~explomemo.inputs.MAX_FILES`."""
    if not handed:
        return found
    kept = list(found.files)
    seen = {f.path for f in kept}
    rows = store.files_of(conn, list(handed))
    for memo_id in handed:
        for row in rows.get(memo_id, []):
            if row.path not in seen and len(kept) < inputs.MAX_FILES:
                seen.add(row.path)
                kept.append(CapturedFile(row.path, row.sha256, row.xxh3, row.size, row.git_blob))
    return found._replace(files=kept)


def inside_root(paths: Sequence[str], root: str) -> list[str]:
    """The ``paths`` a memo recorded against ``root`` could rest on, relative to it.

    A file outside root (``/etc/hosts``, a dependency, ``~/.config``) is one
    that ``record`` refuses: asking for a memo resting on it would cost the
    agent a turn for nothing. Inside means what ``record`` means by it.
    """
    from explomemo.files import resolve_root

    where = resolve_root(root)
    found: dict[str, None] = {}
    for path in paths:
        try:
            found[relative_path(where, path, "file")] = None
        except PathError:
            continue
    return list(found)
