"""Invented demo memory (a software org) for screenshots and benchmarks; no real names or hosts."""
