"""`echo-memory distil` and `echo-memory infer-causal-hints`: opt-in jobs done by the user's own model.

    echo-memory distil [--write] [--limit N] [--scope S] [--json]
    echo-memory distil --clear [--write]
    echo-memory infer-causal-hints [--write] [--limit N] [--json]
    echo-memory infer-causal-hints --clear [--write]
    echo-memory consolidate abstract [--write] [--limit N] [--scope S] [--json]   (registered by consolidate_commands)

Dry run by default: the model is asked and what would be written is printed, nothing is stored.
`--write` stores. `--clear` reports what the command has written that is still current;
`--clear --write` ends exactly that (libs/core/contracts/post_hoc.py says how) and asks no model.
The endpoint comes from ECHO_MEMORY_LLM_API_KEY / ECHO_MEMORY_LLM_MODEL / ECHO_MEMORY_LLM_BASE_URL
(libs/core/config/llm.py). Exit 0 when the run finished (drops are reported, not failures), 1 with one
sentence on stderr for a typed error (no key, the endpoint or the system unreachable, rate limited).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from echo_memory.libs.core.config import Settings, settings_problems
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.identity import DISTIL_AGENT, HINTS_AGENT
from echo_memory.libs.server import eventloop

if TYPE_CHECKING:  # the command's modules load only when it runs
    from echo_memory.libs.core.contracts.bus import Caller
    from echo_memory.libs.core.contracts.verbs import In, Out, Verb
    from echo_memory.libs.local.llm.jobs import BusCall, Report

DEFAULT_LIMIT = 50
AGENTS = {"distil": DISTIL_AGENT, "infer-causal-hints": HINTS_AGENT}  # whose writes each command's --clear ends


def register(sub: Any) -> None:
    for name, what in (("distil", "pending imported turns into facts"),
                       ("infer-causal-hints", "causal hints for facts whose sentence states a cause")):
        parser = sub.add_parser(name, help=f"opt-in: your own model turns {what} (dry run unless --write)")
        parser.add_argument("--write", action="store_true", help="store what the model proposed (default: only print)")
        parser.add_argument("--clear", action="store_true",
                            help=f"end what {name} wrote that is still current (with --write; alone: only list it)")
        parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT,
                            help=f"at most this many {'turns' if name == 'distil' else 'sentences'} sent "
                            f"(default {DEFAULT_LIMIT})")
        if name == "distil":
            parser.add_argument("--scope", help="only this scope's pending turns (default: shared and named scopes)")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.set_defaults(func=lambda s, a: _run(s, a.command, command(s, a)))

    judge = sub.add_parser("judge-external", help="opt-in: your own model grades the answers of a finished "
                           "`eval-external --json` run (dry run unless --send)")
    judge.add_argument("report", help="the JSON report `eval-external ... --json` printed, saved to a file")
    judge.add_argument("--send", action="store_true",
                       help="send the requests to your model (default: only print what would be sent and how many)")
    judge.add_argument("--limit", type=int, help="only the first N questions of the report")
    judge.add_argument("--json", action="store_true", help="print the result as JSON, every question's grade included")
    judge.set_defaults(func=lambda s, a: _run(s, "judge-external", judge_external(a)))


def _run(settings: Settings, command: str, work: Any) -> int:
    from pydantic import ValidationError

    try:
        return int(eventloop.run(work, use_uvloop=settings.uvloop))
    except EchoError as exc:
        print(f"echo-memory {command}: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except ValidationError as exc:  # an ECHO_MEMORY_LLM_* variable that does not parse
        print(f"echo-memory {command}: the ECHO_MEMORY_LLM_* settings are invalid ({settings_problems(exc)})",
              file=sys.stderr)
        return 2


@asynccontextmanager
async def _bus(settings: Settings) -> AsyncIterator[tuple[BusCall, BusCall, BusCall]]:
    """(as the admin, as the distil identity, as the abstracts identity): bus calls bounded by each verb's time-out class."""
    from echo_memory.libs.core.contracts.identity import admin_caller
    from echo_memory.libs.local.connection import bus_session, verb_timeout
    from echo_memory.libs.local.llm.jobs import abstracts_caller, distil_caller
    from echo_memory.libs.server.bus.client import BusClient

    async with bus_session(settings) as broker:
        client = BusClient(broker)

        def calling(caller: Caller) -> BusCall:
            async def call(verb: Verb[In, Out], args: In, /) -> Out:
                return await client.call(verb, args, caller=caller, timeout=verb_timeout(settings, verb))
            return call

        yield (calling(admin_caller(settings.org)), calling(distil_caller(settings.org)),
               calling(abstracts_caller(settings.org)))


async def command(settings: Settings, args: Any) -> int:
    """Run `args.command` (distil or infer-causal-hints) as parsed; the exit code (see the module docstring).

    Raises LlmNotConfigured before anything is sent when the key or model is unset, the client's
    other typed errors, and NotRunning / BusUnreachable when the system is not up.
    """
    name = args.command
    agent = AGENTS[name]
    if args.clear:
        return await _clear(settings, name, agent, write=args.write, as_json=args.json)
    if args.limit < 1:
        print(f"echo-memory {name}: --limit must be at least 1", file=sys.stderr)
        return 2
    from echo_memory.libs.core.config.llm import LlmSettings
    from echo_memory.libs.local.llm.client import ChatClient
    from echo_memory.libs.local.llm.jobs import Report

    chat = ChatClient(LlmSettings())  # refuses before anything is sent when the key or model is unset
    report = Report(command=name, write=args.write)
    async with _bus(settings) as (admin, as_distil, _), chat:
        if name == "distil":
            from echo_memory.libs.local.llm.distil import distil

            await distil(admin, as_distil, chat, write=args.write, limit=args.limit, report=report, scope=args.scope)
        else:
            from echo_memory.libs.local.llm.hints import infer_causal_hints

            await infer_causal_hints(admin, chat, write=args.write, limit=args.limit, report=report)
    _print_report(report, args.json)
    return 0


def _print_report(report: Report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        for item in report.items:
            print(_line(item))
        print(report.summary())


def run_abstract(settings: Settings, args: Any) -> int:
    """`echo-memory consolidate abstract` as parsed: the exit code (see the module docstring)."""
    return _run(settings, "consolidate abstract", abstract(settings, args))


async def abstract(settings: Settings, args: Any) -> int:
    """Have the user's model write an abstract of each digest still without one; print the report; the exit code.

    Dry run unless `args.write` (the model is still asked; the server checks each abstract and stores
    nothing). 2 for a --limit below 1. Raises LlmNotConfigured before anything is sent when the key or
    model is unset, the client's other typed errors, and NotRunning / BusUnreachable when the system is down.
    """
    if args.limit < 1:
        print("echo-memory consolidate abstract: --limit must be at least 1", file=sys.stderr)
        return 2
    from echo_memory.libs.core.config.llm import LlmSettings
    from echo_memory.libs.local.llm.abstracts import write_abstracts
    from echo_memory.libs.local.llm.client import ChatClient
    from echo_memory.libs.local.llm.jobs import Report

    chat = ChatClient(LlmSettings())  # refuses before anything is sent when the key or model is unset
    report = Report(command="consolidate abstract", write=args.write)
    async with _bus(settings) as (_, _, as_abstracts), chat:
        await write_abstracts(as_abstracts, chat, write=args.write, limit=args.limit, report=report, scope=args.scope)
    _print_report(report, args.json)
    return 0


async def judge_external(args: Any) -> int:
    """Grade a finished eval-external report's questions with the user's model; the exit code.

    Dry run (no --send): prints the number of calls and the first question's requests, sends nothing,
    needs no key. 2 for a file that is missing, not JSON, or not a report with the question texts;
    LlmNotConfigured (exit 1) with --send and no key or model. Never touches any store.
    """
    from pathlib import Path

    from echo_memory.libs.core.config.llm import LlmSettings
    from echo_memory.libs.local.llm import judge

    try:
        report = json.loads(Path(args.report).read_text(encoding="utf-8"))
        asked = judge.questions(report)
    except (OSError, ValueError) as exc:  # judge.ReportError and json.JSONDecodeError are ValueErrors
        print(f"echo-memory judge-external: {args.report}: {exc}", file=sys.stderr)
        return 2
    if args.limit is not None:
        if args.limit < 1:
            print("echo-memory judge-external: --limit must be at least 1", file=sys.stderr)
            return 2
        asked = asked[: args.limit]
    dataset = str(report.get("dataset", "?"))
    llm = LlmSettings()
    if not args.send:
        print(judge.dry_run(dataset, asked, llm.model, llm.base_url))
        return 0
    from echo_memory.libs.local.llm.client import ChatClient

    chat = ChatClient(llm)  # refuses before anything is sent when the key or model is unset
    async with chat:
        result = judge.summary(dataset, await judge.judge(chat, asked), chat.model)
    print(json.dumps(result, indent=2) if args.json else judge.render(result))
    return 0


def _line(item: dict[str, Any]) -> str:
    if "digest_id" in item:
        about = f"entity {item['entity']}" if item.get("entity") else item.get("kind", "topic")
        said = "".join(f"\n  + {s['text']} [cites {', '.join(s['cites'])}]" for s in item["sentences"])
        return f"digest {item['digest_id']} ({about}, {item['scope']}): {item.get('outcome', '')}{said}"
    if "episode_id" in item:
        facts = "".join(f"\n  + ({f['source']}) -{f['relation']}-> ({f['target']}): {f['fact']}" for f in item["facts"])
        return f"turn {item['episode_id']} ({item['scope']}): {item.get('outcome', '')}{facts}"
    if "fact_id" in item:
        return f"fact {item['fact_id']}: {item['causal_hint']} (quoting \"{item['quote']}\"): {item['sentence']}"
    return str(item.get("note", item))


async def _clear(settings: Settings, name: str, agent: str, *, write: bool, as_json: bool) -> int:
    from echo_memory.libs.core.contracts.parsing import parse_args
    from echo_memory.libs.core.contracts.post_hoc import ClearPostHocInput
    from echo_memory.libs.core.contracts.verbs import CLEAR_POST_HOC

    async with _bus(settings) as (admin, _, _):
        result = await admin(CLEAR_POST_HOC, parse_args(ClearPostHocInput, {"agent": agent, "apply": write}))
    if as_json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
        return 0
    verb = "ended" if write else "would end (dry run: nothing changed)"
    for fact in result.facts:
        restored = f"; restored {fact.restored_from}" if fact.restored_from else ""
        print(f"{verb} {fact.fact_id} ({fact.scope}){restored}: {fact.text}")
    released = result.released_episodes
    print(f"echo-memory {name} --clear: {verb} {len(result.facts)} current fact version(s) written by {agent}"
          + (f"; {len(released)} imported turn(s) {'pending again' if write else 'would be pending again'}"
             if released else "")
          + ("" if write or not result.facts else "; run with --write to apply"))
    return 0
