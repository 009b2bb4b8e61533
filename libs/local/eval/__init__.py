"""The retrieval harnesses: dataset loaders, metrics, and runners over the real bus.

Datasets are read from the paths the caller gives, never copied in and never looked for outside
the installed tree; research experiments built on these runners live in the repository's lab/.
"""
