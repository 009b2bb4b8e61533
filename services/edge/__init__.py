"""The MCP edge: the only public entry. Authenticates, validates, makes one bus request per tool call.

It holds no database connection; everything it knows about memory comes back over NATS.
"""
