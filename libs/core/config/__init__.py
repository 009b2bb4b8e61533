"""Process settings, read once from the environment at each entry point and passed down.

Per-org or per-scope values never live here; they come from the org's database.
"""

from echo_memory.libs.core.config.llm import LlmSettings
from echo_memory.libs.core.config.settings import (
    Settings,
    Timeouts,
    Workers,
    default_home,
    load_settings,
    settings_problems,
)

__all__ = ["LlmSettings", "Settings", "Timeouts", "Workers", "default_home", "load_settings", "settings_problems"]
