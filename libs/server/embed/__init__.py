"""Sentence embeddings: all-MiniLM-L6-v2 as int8 ONNX, loaded from installed packages only."""

from echo_memory.libs.server.embed.minilm import DIM, MiniLM, count_tokens, embed_across_cores, settle

__all__ = ["DIM", "MiniLM", "count_tokens", "embed_across_cores", "settle"]
