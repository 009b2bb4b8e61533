"""NATS plumbing: brokers with tracing and the typed request client. Imports only contracts, config and telemetry."""
