"""The shipped model without fastembed (recall/shipped_model.py): fastembed's vectors, to the
last bit, and none of fastembed's modules imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from explomemo.recall import embeddings
from explomemo.recall.embeddings import load_embedder

#: Short and long (over 128 and over 256 tokens: the truncation), unicode, code, the special
#: tokens' spellings, nothing at all.
TEXTS = [
    "",
    "retry?",
    "where is the retry policy decided?",
    "How does the client decide how many times to retry a failed request?",
    "café naïve résumé Ünïcödé ΑΒΓ δέλτα Привет мир",
    "日本語のテキスト検索 中文 🚀🔥",
    "[CLS] [SEP] [PAD] [MASK] [UNK] [cls]",
    "def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:\n    return rows\n",
    "The vector thread embeds memos recorded by other processes. " * 12,  # about 150 tokens
    "\t".join(f"token_{n} = compute({n}) # {n}" for n in range(120)),  # far over 256
    "x" * 5000,
]


def test_the_shipped_model_gives_fastembeds_vectors_for_the_same_files() -> None:
    folder = embeddings.default_model_dir()
    direct = load_embedder({})
    through_fastembed = load_embedder({"EXPLOMEMO_MODEL_PATH": str(folder)})
    assert direct is not None and through_fastembed is not None
    assert type(direct).__name__ == "ShippedModelEmbedder"
    assert type(through_fastembed).__name__ == "FastembedEmbedder"
    ours, theirs = direct.embed(TEXTS), through_fastembed.embed(TEXTS)
    assert ours.dtype == theirs.dtype == np.float32
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    assert float(np.abs(ours - theirs).max()) <= 1e-6


def test_loading_the_shipped_model_imports_no_fastembed(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from explomemo.recall.embeddings import load_embedder\n"
        "model = load_embedder({})\n"
        "(row,) = model.embed(['where is the retry policy decided?'])\n"
        "print(row.shape, sorted(m for m in sys.modules if m.split('.')[0] in"
        " {'fastembed', 'huggingface_hub', 'loguru', 'PIL'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert done.stdout.strip() == "(384,) []", done.stdout + done.stderr
