"""The retrieval service: query_memory and the read log."""
