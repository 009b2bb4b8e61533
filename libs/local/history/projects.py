"""project = the git repository a turn's working directory belongs to."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=4096)
def git_root(cwd: str) -> str | None:
    """The nearest directory at or above `cwd` holding `.git` (a directory, or a worktree's file).

    None when there is none or `cwd` no longer exists (an old session of a deleted checkout).
    """
    try:
        here = Path(cwd).expanduser().resolve()
    except (OSError, RuntimeError):
        return None
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return str(folder)
    return None


def project_of(cwd: str | None) -> tuple[str | None, str | None]:
    """(project name, git root) for a working directory.

    The name is the git root's directory name (what `echo-memory docs sync` names a project by
    default); outside a repository it is the working directory's own name, and the root None.
    """
    if not cwd:
        return None, None
    root = git_root(cwd)
    if root is not None:
        return Path(root).name, root
    name = Path(cwd).name
    return (name or None), None
