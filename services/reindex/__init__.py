"""The reindex service: rebuilds derived data (embeddings, lexical statistics)."""
