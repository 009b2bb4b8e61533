"""NATS plumbing: brokers with tracing, the typed request client, and the service runtime."""
