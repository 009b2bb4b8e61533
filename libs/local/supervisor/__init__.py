"""The embedded default: Postgres, nats-server and every service under one foreground supervisor."""
