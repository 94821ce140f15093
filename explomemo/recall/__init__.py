"""Finding memos: by meaning (embeddings, vectors) and by words, and the prompt hook's match."""
