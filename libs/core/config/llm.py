"""Settings of the opt-in commands that call the user's own model (`echo-memory distil`, `infer-causal-hints`).

Read from `ECHO_MEMORY_LLM_*` variables, e.g. `ECHO_MEMORY_LLM_API_KEY`, `ECHO_MEMORY_LLM_MODEL`,
`ECHO_MEMORY_LLM_BASE_URL`. Nothing else in Echo Memory reads them: no service, write, import or
hook ever calls a model. Tests build `LlmSettings(...)` with keyword arguments.
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

API_KEY_VARIABLE = "ECHO_MEMORY_LLM_API_KEY"
MODEL_VARIABLE = "ECHO_MEMORY_LLM_MODEL"


class LlmSettings(BaseSettings):
    """Where the user's OpenAI-compatible endpoint is, which model to ask, and how long to wait."""

    model_config = SettingsConfigDict(env_prefix="ECHO_MEMORY_LLM_", extra="ignore")

    api_key: SecretStr | None = Field(None, description="bearer key of the endpoint; unset, the commands refuse to run")
    model: str | None = Field(None, description="model name the endpoint knows, e.g. gpt-4o-mini")
    base_url: str = Field("https://api.openai.com/v1", description="the endpoint's base URL (…/v1); "
                          "/chat/completions is appended")
    timeout_seconds: float = Field(60.0, gt=0, le=600, description="one request's bound, connect to last byte")
    max_retries: int = Field(3, ge=0, le=10, description="retries of a rate-limited (HTTP 429) or 5xx request")
    max_retry_wait_seconds: float = Field(30.0, ge=0, description="longest wait before a retry, whatever "
                                          "Retry-After asks")
    allow_plain_http: bool = Field(False, description="send the key over http:// to a host other than this "
                                   "machine (default: only https://, or http:// to localhost / 127.0.0.1 / ::1)")
