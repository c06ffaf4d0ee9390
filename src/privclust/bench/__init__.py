"""Benchmarks: utility (NICV over epsilon) and speed/memory, written as JSON + markdown + PNG."""
