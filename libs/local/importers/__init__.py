"""Readers of other memory systems' stores, mapped onto entities and facts (`echo-memory import --from`).

One module per source (mcp_memory, mem0, basic_memory) turns its files into `SourceRecord`s;
engine.py sends them through the writes service's `write_episode`, the path every agent write
takes; export_mcp.py writes the graph back out in the MCP reference server's format.
"""
