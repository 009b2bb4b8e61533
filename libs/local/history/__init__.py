"""Agent histories read from their clients' own files: one complete turn at a time.

Each source module (claude_code, codex, cursor, gemini, opencode, vscode) streams one client's
on-disk format into `Turn`s (turns.py); `engine.py` imports them through the writes service's
`import_episodes`, keeping a per-source watermark and per-conversation checkpoints (state.py).
The formats, versions checked, id scheme and watermark rules are in docs/import.md.
"""
