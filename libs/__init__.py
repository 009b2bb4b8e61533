"""Code shared by several Echo Memory services: contracts, store, bus, embedder, telemetry, config, CLI."""
