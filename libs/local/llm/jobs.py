"""What the model commands share: how they reach the bus, their identities, and their report.

The commands talk to the running system only through bus verbs (`BusCall`, bounded by the verb's
time-out class); the user's model only through libs/local/llm/client.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.identity import ABSTRACTS_AGENT, DISTIL_AGENT, WILDCARD
from echo_memory.libs.core.contracts.verbs import In, Out, Verb
from echo_memory.libs.local.llm.client import ChatClient, Reply
from echo_memory.libs.local.llm.errors import LlmMalformedReply


class BusCall(Protocol):
    """One bus request as a fixed identity, bounded by the verb's time-out class: the verb's result
    model, or its typed EchoError (as `BusClient.call`)."""

    async def __call__(self, verb: Verb[In, Out], args: In, /) -> Out: ...


DISTIL_TOOL = "echo-memory distil"


def distil_caller(org: str) -> Caller:
    """The identity distilled facts are written as: every scope's token grant, each scope's writer list still applies."""
    return Caller(org=org, agent_id=DISTIL_AGENT, read_scopes=[WILDCARD], write_scopes=[WILDCARD], tool=DISTIL_TOOL)


ABSTRACTS_TOOL = "echo-memory consolidate abstract"


def abstracts_caller(org: str) -> Caller:
    """The identity digest abstracts are stored as: every scope's token grant, each scope's writer list still applies."""
    return Caller(org=org, agent_id=ABSTRACTS_AGENT, read_scopes=[WILDCARD], write_scopes=[WILDCARD],
                  tool=ABSTRACTS_TOOL)


@dataclass
class Report:
    """One run: what was sent, what came back, what was (or would be) written, and everything dropped."""

    command: str
    write: bool
    sent: int = 0  # items (episodes, sentences or digests) sent to the model
    requests: int = 0  # HTTP requests, retries included
    malformed_replies: int = 0  # dropped whole, never stored
    candidates: int = 0  # facts, hints or abstracts the model proposed
    written: int = 0  # facts, hints or abstracts stored (0 in a dry run)
    would_write: int = 0  # facts, hints or abstracts a write run would store
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> candidates dropped
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> items not sent or not finished
    more: bool = False  # --limit stopped the run before the last item
    items: list[dict[str, Any]] = field(default_factory=list)  # per item: what was (or would be) written

    def refused(self, exc: EchoError, item: dict[str, Any], reason: str, outcome: str) -> None:
        """Counts a write the service refused for good: skipped `reason (code)`, the item's outcome
        `outcome: message`. A retryable error is raised again: it ends the run, and the next run
        sends the item again."""
        if exc.retryable:
            raise exc
        self.skipped[f"{reason} ({exc.code})"] += 1
        item["outcome"] = f"{outcome}: {exc.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"command": self.command, "write": self.write, "sent": self.sent, "requests": self.requests,
                "malformed_replies": self.malformed_replies, "candidates": self.candidates,
                "written": self.written, "would_write": self.would_write, "dropped": dict(self.dropped),
                "skipped": dict(self.skipped), "more": self.more, "items": self.items}

    def summary(self) -> str:
        """One paragraph for a person, ending with what to run next."""
        done = f"wrote {self.written}" if self.write else f"would write {self.would_write} (dry run: nothing written)"
        dropped = ", ".join(f"{n} {reason}" for reason, n in sorted(self.dropped.items())) or "none"
        skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items())) or "none"
        lines = [f"{self.command}: sent {self.sent} to your model in {self.requests} request(s); "
                 f"{self.candidates} candidate(s), {done}",
                 f"dropped: {dropped}; malformed replies dropped: {self.malformed_replies}; skipped: {skipped}"]
        if self.more:
            lines.append("more items remain past --limit; run again to continue")
        if not self.write and self.would_write:
            lines.append("run again with --write to store them")
        return "\n".join(lines)


async def ask(chat: ChatClient, system: str, user: str, reply: type[Reply], report: Report, *,
              sent: int = 1) -> Reply | str:
    """The model's reply to one request about `sent` items, counted in `report` (items sent, HTTP
    requests); a reply that is not the schema is counted as malformed and comes back as its reason.

    Raises the client's other typed errors (unavailable, rate limited, HTTP refusal).
    """
    report.sent += sent
    before = chat.requests
    try:
        return await chat.structured(system, user, reply)
    except LlmMalformedReply as exc:
        report.malformed_replies += 1
        return exc.message
    finally:
        report.requests += chat.requests - before
