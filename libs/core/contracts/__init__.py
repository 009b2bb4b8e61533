"""The one place where the shapes crossing a boundary are defined.

The edge, every service and the CLI import these models; nothing else defines a tool's input or
output, a bus message or an error. `echo_memory.libs.core.contracts` imports no other internal package.
"""
