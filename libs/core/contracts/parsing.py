"""Arguments as a contract model, or one `InvalidArgument` that names every bad field."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from echo_memory.libs.core.contracts.errors import InvalidArgument

ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_args(model: type[ModelT], args: dict[str, Any]) -> ModelT:
    """`args` validated as `model`; raises `InvalidArgument` listing each field and what is wrong with it."""
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise invalid_argument(exc) from None


def invalid_argument(exc: ValidationError) -> InvalidArgument:
    """The `InvalidArgument` a service would answer for arguments that failed validation with `exc`."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return InvalidArgument("invalid arguments: " + "; ".join(problems))
