"""The retrieval harness: dataset loaders, metrics, and runners over the real bus.

Datasets are read from where they live (../shared/datasets by default), never copied in.
"""
