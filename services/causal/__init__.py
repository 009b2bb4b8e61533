"""The causal service: trace_cause over facts that carry a causal hint."""
