"""The shipped model run with onnxruntime and tokenizers directly, as fastembed runs it.

Importing fastembed costs a new process about 1.0 s, of which numpy, onnxruntime and
tokenizers are 0.4 s; the rest (fastembed's own modules, its image models,
huggingface_hub) is the first recall of a fresh server waiting. This module repeats
fastembed's pipeline for the shipped model (``PooledNormalizedEmbedding``, fastembed
0.9) step by step, and the vectors are the same to the last bit
(tests/recall/test_shipped_model.py compares them with fastembed's on the same files):

- the tokenizer of ``tokenizer.json``, truncated at the smaller of ``model_max_length`` and
  ``max_length`` of ``tokenizer_config.json`` (256 here; the 128 of ``tokenizer.json`` is
  replaced), with the tokens of ``special_tokens_map.json`` added, and padded to the
  longest text of a run, not to the fixed 128 that ``tokenizer.json`` asks for;
- ``input_ids``, ``attention_mask`` and an all-zero ``token_type_ids``, all int64, run on
  the CPU with fastembed's session options (every graph optimisation, :data:`SESSION_OPTIONS`
  of embeddings.py); fastembed would take CUDA where an onnxruntime-gpu finds it, but every
  figure of the shipped model is the CPU's;
- the first output, averaged over the attention mask in float64, scaled to unit length
  (norm at least 1e-12), then float32;
- then, as every embedder here, scaled to unit length once more in float32
  (:func:`explomemo.recall.embeddings.unit_rows`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import AddedToken, Tokenizer

from explomemo.recall.embeddings import unit_rows

#: How many embeds run at once: two, as a :class:`FastembedEmbedder` has two lanes, so a
#: request's query never waits behind the vector thread's batch and a third caller does
#: not take the core that numpy and SQLite need.
LANES = 2


class ShippedModelEmbedder:
    """The model in ``folder`` (the shipped one) producing normalised float32 rows."""

    def __init__(self, model_id: str, folder: Path, session_options: dict[str, Any]) -> None:
        self.model_id = model_id
        self._tokenizer = _tokenizer(folder)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = session_options["threads"]
        options.inter_op_num_threads = session_options["threads"]
        options.enable_cpu_mem_arena = session_options["enable_cpu_mem_arena"]
        self._session = ort.InferenceSession(
            str(folder / "model.onnx"), providers=["CPUExecutionProvider"], sess_options=options
        )
        self._lanes = threading.BoundedSemaphore(LANES)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed texts; rows are normalised to unit length."""
        with self._lanes:
            # One text a run, as FastembedEmbedder.embed: the int8 model quantizes its
            # activations with one scale for the whole run, so a text's vector would
            # depend on the texts beside it.
            rows = [self._embed_one(text) for text in texts]
        return unit_rows(np.array(rows, dtype=np.float32).reshape(len(texts), -1))

    def _embed_one(self, text: str) -> npt.NDArray[np.float32]:
        encoding = self._tokenizer.encode(text)
        ids = np.array([encoding.ids], dtype=np.int64)
        mask = np.array([encoding.attention_mask], dtype=np.int64)
        tokens = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        summed = np.sum(tokens, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        mean = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
        unit = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        row: npt.NDArray[np.float32] = unit[0].astype(np.float32)
        return row


def _tokenizer(folder: Path) -> Tokenizer:
    """The tokenizer of ``folder`` set up as fastembed's ``load_tokenizer`` sets it up."""
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    truncation = tokenizer.truncation or {}
    tokenizer.enable_truncation(
        max_length=min(config["model_max_length"], config["max_length"]),
        direction=config.get("truncation_side") or truncation.get("direction", "right"),
    )
    special = json.loads((folder / "special_tokens_map.json").read_text(encoding="utf-8"))
    for token in special.values():
        tokenizer.add_special_tokens([token if isinstance(token, str) else AddedToken(**token)])
    # One text a run, padded to the longest of the run: no padding at all.
    tokenizer.no_padding()
    return tokenizer
