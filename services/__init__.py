"""One package per service; each owns one slice of behaviour and talks to the others only over NATS."""
