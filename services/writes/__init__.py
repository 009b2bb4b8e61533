"""The writes service: everything that changes memory, one transaction per call, no language model."""
