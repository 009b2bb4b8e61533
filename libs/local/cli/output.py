"""What every command prints the same way."""

from __future__ import annotations

import json

from pydantic import BaseModel


def print_json(result: BaseModel) -> None:
    """A command's `--json` answer: the result model as indented JSON on stdout."""
    print(json.dumps(result.model_dump(mode="json"), indent=2))
