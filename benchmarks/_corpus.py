"""A synthetic memo corpus for the recall and memory benchmarks, with real vectors.

Texts are templated questions and conclusions about an imaginary web service
(components x aspects x phrasings). ``distinct`` of them are embedded with the
real shipped model (explomemo.recall.embeddings.load_embedder, offline). A database of
N memos reuses those vectors: memo i gets text i mod distinct (its question
carries a variant number so questions stay unique per project, as the store
requires) and the text's two vectors (whole memo, question) each plus small
Gaussian noise, re-normalised (cosine to the original about 0.95). Word
search sees the real templated texts through the FTS index that
``Store.save_memo`` fills.

Memos are written straight through :class:`explomemo.store.database.Store` in one
transaction (``save_memo`` + ``set_embedding``), which is what
``MemoCache.record`` does minus the hashing and the model call.
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import xxhash

from explomemo.check.hashing import git_blob_id
from explomemo.store.database import FileRow, Store

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from explomemo.recall.embeddings import Embedder

COMPONENTS = [
    "authentication",
    "session handling",
    "rate limiting",
    "billing",
    "invoice export",
    "search indexing",
    "image upload",
    "email notifications",
    "feature flags",
    "database migrations",
    "the caching layer",
    "the websocket gateway",
    "the job queue",
    "audit logging",
    "permissions",
    "password reset",
    "API versioning",
    "tenant isolation",
    "metrics export",
    "configuration loading",
    "CSRF protection",
    "file storage",
    "webhook delivery",
    "the payment retry logic",
    "user onboarding",
    "GraphQL resolvers",
    "the admin dashboard",
    "report generation",
    "the plugin loader",
    "OAuth login",
    "two-factor codes",
    "the CLI entry point",
    "background schedulers",
    "health checks",
    "request tracing",
    "the ORM models",
    "data export to CSV",
    "localisation",
    "the mobile push service",
    "dependency injection",
]
ASPECTS = [
    "wired together",
    "configured",
    "tested",
    "initialised at start-up",
    "retried on failure",
    "validated",
    "logged",
    "authorised",
    "cached",
    "deployed",
]
PHRASINGS = [
    "How is {c} {a}?",
    "Where is {c} {a}?",
    "Which module decides how {c} is {a}?",
    "What happens when {c} is {a}?",
    "How does the service get {c} {a}?",
]
QUERY_PHRASINGS = [
    "where do we handle {c} being {a}",
    "explain how {c} gets {a}",
    "which code path has {c} {a}",
    "is {c} {a} anywhere",
    "find the place where {c} is {a}",
    "how come {c} is {a} twice",
    "what part of the app keeps {c} {a}",
]
UNRELATED = [
    "recipe for banana bread",
    "best hiking trails in Norway",
    "how tall is Mount Everest",
    "lyrics of a sea shanty",
    "rules of cricket explained",
    "knitting a scarf for beginners",
]
MODULES = [
    "app/core",
    "app/api",
    "app/services",
    "app/workers",
    "app/db",
    "app/web",
    "lib/util",
    "lib/net",
    "app/auth",
    "app/billing",
    "app/search",
    "app/notify",
]
VERBS = ["parses", "checks", "loads", "stores", "retries", "signs", "filters", "routes"]


def memo_text(i: int) -> tuple[str, str]:
    """The i-th distinct (question, conclusion) pair."""
    rng = random.Random(i)
    c = COMPONENTS[i % len(COMPONENTS)]
    a = ASPECTS[(i // len(COMPONENTS)) % len(ASPECTS)]
    p = PHRASINGS[(i // (len(COMPONENTS) * len(ASPECTS))) % len(PHRASINGS)]
    question = p.format(c=c, a=a)
    m1, m2 = rng.sample(MODULES, 2)
    f1 = f"{c.split()[-1].lower()}_{rng.choice(VERBS)}"
    conclusion = (
        f"{c[0].upper() + c[1:]} is {a} in {m1}/{c.split()[-1].lower()}.py by {f1}(); it calls"
        f" {m2}/helpers.py:{rng.choice(VERBS)}_{rng.randrange(100)}() and reads"
        f" settings.{c.split()[-1].upper()}_{rng.choice(['TIMEOUT', 'ENABLED', 'URL', 'KEY'])}."
        f" Edge case: {rng.choice(VERBS)} fails when the {rng.choice(MODULES)} cache is cold."
    )
    return question, conclusion


def queries(count: int, offset: int) -> list[str]:
    """``count`` distinct queries (about one in eight unrelated to any memo)."""
    return [query for query, _ in topic_queries(count, offset)]


def topic_queries(count: int, offset: int) -> list[tuple[str, tuple[str, str] | None]]:
    """:func:`queries` with the (component, aspect) each asks about, None when unrelated:
    a memo answers it when its question names both."""
    found: list[tuple[str, tuple[str, str] | None]] = []
    i = offset
    while len(found) < count:
        if i % 8 == 7:
            found.append((f"{UNRELATED[i % len(UNRELATED)]} ({i})", None))
        else:
            rng = random.Random(10_000 + i)
            c = COMPONENTS[rng.randrange(len(COMPONENTS))]
            a = ASPECTS[rng.randrange(len(ASPECTS))]
            q = QUERY_PHRASINGS[i % len(QUERY_PHRASINGS)].format(c=c, a=a)
            found.append((f"{q} #{i}", (c, a)))
        i += 1
    return found


def answers(question: str, topic: tuple[str, str]) -> bool:
    """Whether a memo of this question answers a query about ``topic``."""
    component, aspect = topic
    return f"{component} is {aspect}" in question or f"{component} {aspect}" in question


@dataclass
class Pool:
    """Files memos can rest on: their rows as recorded."""

    root: Path
    rows: list[FileRow]


def make_pool(root: Path, count: int, size: int) -> Pool:
    """``count`` files of ``size`` deterministic bytes, with their digests."""
    rows: list[FileRow] = []
    for i in range(count):
        rel = f"src/m{i // 100:03d}/file{i:05d}.py"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = random.Random(i).randbytes(size)
        path.write_bytes(data)
        # With its git blob id, as every record since blob ids came stores it: a memo
        # file without one is given it by the next record of the same content, which at
        # 100,000 memos updates hundreds of rows (an old import's cost, not a record's).
        rows.append(
            FileRow(
                rel,
                hashlib.sha256(data).hexdigest(),
                xxhash.xxh3_128_hexdigest(data),
                size,
                git_blob_id(data),
            )
        )
    return Pool(root, rows)


def base_vectors(embedder: Embedder, distinct: int, batch: int = 128) -> npt.NDArray[np.float32]:
    """Real vectors of the first ``distinct`` memos, embedded in batches: (distinct, 2, dim),
    the whole memo's then the question's (explomemo.recall.vectors.MemoTexts)."""
    import numpy as np

    from explomemo.recall.vectors import MemoTexts

    out = []
    for start in range(0, distinct, batch):
        texts = []
        for i in range(start, min(distinct, start + batch)):
            q, c = memo_text(i)
            pair = MemoTexts.of(q, c, [])
            texts += [pair.whole, pair.question]
        rows = embedder.embed(texts)
        out.append(rows.reshape(len(texts) // 2, 2, rows.shape[1]))
    return np.concatenate(out).astype(np.float32)


def populate(
    db: Path,
    project: str,
    count: int,
    pool: Pool,
    vectors: npt.NDArray[np.float32],
    model_id: str,
    files_per_memo: int = 8,
    noise: float = 0.017,
) -> float:
    """Write ``count`` memos with vectors through the store in one transaction; seconds taken."""
    import numpy as np

    from explomemo import inputs
    from explomemo.memos.cache import now_iso
    from explomemo.recall.vectors import embedding_text, text_hash

    rng = np.random.default_rng(count)
    pick = random.Random(count)
    distinct = len(vectors)
    started = time.perf_counter()
    store = Store.open(db)
    try:
        with store.write() as conn:
            for i in range(count):
                base_q, conclusion = memo_text(i % distinct)
                question = base_q if i < distinct else f"{base_q} (variant {i // distinct})"
                files = sorted(pick.sample(pool.rows, files_per_memo), key=lambda f: f.path)
                memo_id = store.save_memo(
                    conn,
                    memo_id=None,
                    project=project,
                    question=question,
                    question_key=inputs.question_key(question),
                    conclusion=conclusion,
                    root=str(pool.root),
                    recorded_at=now_iso(),
                    files=files,
                )
                pair = vectors[i % distinct]
                if i >= distinct:
                    pair = pair + rng.normal(0.0, noise, pair.shape).astype(np.float32)
                    pair = (pair / np.linalg.norm(pair, axis=1, keepdims=True)).astype(np.float32)
                text = embedding_text(question, conclusion, [f.path for f in files])
                store.set_embedding(
                    conn,
                    memo_id,
                    pair[0].tobytes(),
                    pair[1].tobytes(),
                    model_id,
                    text_hash(model_id, text),
                )
    finally:
        store.close()
    return time.perf_counter() - started
