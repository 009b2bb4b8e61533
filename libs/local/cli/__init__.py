"""The `echo-memory` command line."""
