"""The dashboard: a loopback-only web page over the memory graph, reading through bus verbs only."""
