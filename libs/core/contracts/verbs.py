"""Every verb of every service, listed once: who answers it, its argument and result models, its time-out.

Callers (the edge, the CLI) and services both import this table: the edge publishes the models as
tool schemas and sends requests to the service named here; a service builds one subscriber per verb
it lists here and refuses to start if its routes and this table disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from echo_memory.libs.core.contracts import (
    admin,
    audit,
    calibration,
    causal,
    consolidation,
    dashboard,
    distil,
    documents,
    end_facts,
    entities,
    forget,
    health,
    imports,
    post_hoc,
    query,
    reindex,
    write,
)

TimeoutKind = Literal["read", "write", "admin", "bulk", "auth"]


In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


@dataclass(frozen=True)
class Verb(Generic[In, Out]):
    """A verb typed by its argument model `In` and result model `Out`, so callers and handlers are checked."""

    service: str
    name: str
    input: type[In]
    output: type[Out]
    timeout: TimeoutKind  # a field of echo_memory.libs.core.config.Timeouts


WRITE_EPISODE = Verb("writes", "write_episode", write.WriteEpisodeInput, write.WriteEpisodeResult, "write")
RECORD_RECALL_SAVE = Verb(
    "writes", "record_recall_save", documents.RecordRecallSaveInput,
    documents.RecordRecallSaveResult, "write",
)
PENDING_DOCUMENTS = Verb("writes", "pending_documents", documents.PendingDocumentsInput, documents.PendingDocumentsResult, "read")
MARK_INGESTED = Verb("writes", "mark_ingested", documents.MarkIngestedInput, documents.MarkIngestedResult, "write")
REGISTER_DOCUMENTS = Verb(
    "writes", "register_documents", documents.RegisterDocumentsInput,
    documents.RegisterDocumentsResult, "bulk",
)
TOKEN_CREATE = Verb("writes", "token_create", admin.TokenCreateInput, admin.TokenCreateResult, "admin")
TOKEN_VERIFY = Verb("writes", "token_verify", admin.TokenVerifyInput, admin.TokenVerifyResult, "auth")
TOKEN_LIST = Verb("writes", "token_list", admin.NoArgs, admin.TokenListResult, "admin")
TOKEN_REVOKE = Verb("writes", "token_revoke", admin.TokenRevokeInput, admin.TokenRevokeResult, "admin")
SCOPE_CREATE = Verb("writes", "scope_create", admin.ScopeCreateInput, admin.ScopeCreateResult, "admin")
STATUS = Verb("writes", "status", admin.NoArgs, admin.StatusResult, "admin")
TOKEN_GRANT = Verb("writes", "token_grant", admin.TokenGrantInput, admin.TokenGrantResult, "admin")
SCOPE_LIST = Verb("writes", "scope_list", admin.NoArgs, admin.ScopeListResult, "admin")
SCOPE_SHOW = Verb("writes", "scope_show", admin.ScopeNameInput, admin.ScopeShowResult, "admin")
SCOPE_DELETE = Verb("writes", "scope_delete", admin.ScopeNameInput, admin.ScopeDeleteResult, "admin")
IMPORT_EPISODES = Verb("writes", "import_episodes", imports.ImportEpisodesInput, imports.ImportEpisodesResult, "bulk")
CALIBRATE = Verb("writes", "calibrate", calibration.CalibrateInput, calibration.CalibrateResult, "bulk")
PENDING_EPISODES = Verb("writes", "pending_episodes", distil.PendingEpisodesInput, distil.PendingEpisodesResult, "read")
MARK_DISTILLED = Verb("writes", "mark_distilled", distil.MarkDistilledInput, distil.MarkDistilledResult, "write")
# The opt-in model commands' (echo-memory infer-causal-hints, distil --clear); admin only.
UNHINTED_FACTS = Verb("writes", "unhinted_facts", post_hoc.UnhintedFactsInput, post_hoc.UnhintedFactsResult, "read")
ADD_CAUSAL_HINTS = Verb("writes", "add_causal_hints", post_hoc.AddCausalHintsInput, post_hoc.AddCausalHintsResult, "write")
CLEAR_POST_HOC = Verb("writes", "clear_post_hoc", post_hoc.ClearPostHocInput, post_hoc.ClearPostHocResult, "bulk")
# Erasure (echo-memory forget), admin only: erase in one transaction, then vacuum and clean the stream.
FORGET = Verb("writes", "forget", forget.ForgetInput, forget.ForgetResult, "bulk")
FORGET_FINISH = Verb("writes", "forget_finish", forget.ForgetFinishInput, forget.ForgetFinishResult, "bulk")
FORGET_LOG = Verb("writes", "forget_log", forget.ForgetLogInput, forget.ForgetLogResult, "admin")
# A person fixes entity identity (echo-memory entities ...); admin only.
ENTITY_DEFERRED = Verb("writes", "entity_deferred", entities.EntityDeferredInput, entities.EntityDeferredResult, "admin")
ENTITY_MERGE = Verb("writes", "entity_merge", entities.EntityMergeInput, entities.EntityMergeResult, "admin")
ENTITY_UNMERGE = Verb("writes", "entity_unmerge", entities.EntityUnmergeInput, entities.EntityUnmergeResult, "admin")
ENTITY_RENAME = Verb("writes", "entity_rename", entities.EntityRenameInput, entities.EntityRenameResult, "admin")
# `import --from` replaying another memory system's deletions; not an MCP tool.
END_FACTS = Verb("writes", "end_facts", end_facts.EndFactsInput, end_facts.EndFactsResult, "write")
QUERY_MEMORY = Verb("retrieval", "query_memory", query.QueryMemoryInput, query.QueryMemoryResult, "read")
TRACE_CAUSE = Verb("causal", "trace_cause", causal.TraceCauseInput, causal.TraceCauseResult, "read")
GET_AUDIT_LOG = Verb("audit", "get_audit_log", audit.GetAuditLogInput, audit.GetAuditLogResult, "read")
WHY = Verb("audit", "why", audit.WhyInput, audit.WhyResult, "read")
AUDIT_EXPORT = Verb("audit", "export", audit.ExportInput, audit.ExportPage, "bulk")
AUDIT_IMPORT_STAGE = Verb("audit", "import_stage", audit.ImportStageInput, audit.ImportStageResult, "bulk")
AUDIT_IMPORT = Verb("audit", "import", audit.ImportInput, audit.ImportResult, "bulk")
HEALTH = Verb("audit", "health", health.HealthInput, health.HealthResult, "admin")
# A whole-graph aggregation (clusters and layout), like `status` an admin-class time-out, not a point read's.
DASHBOARD_GRAPH = Verb("audit", "dashboard_graph", dashboard.GraphInput, dashboard.GraphResult, "admin")
ENTITY_FACTS = Verb("audit", "entity_facts", dashboard.EntityFactsInput, dashboard.EntityFactsResult, "read")
RECALL_COST = Verb("audit", "recall_cost", dashboard.RecallCostInput, dashboard.RecallCostResult, "read")
REINDEX = Verb("reindex", "reindex", reindex.ReindexInput, reindex.ReindexResult, "bulk")
LEXICAL_STATUS = Verb("reindex", "lexical_status", reindex.LexicalStatusInput, reindex.LexicalStatusResult, "read")
CONSOLIDATE = Verb("consolidation", "consolidate", consolidation.ConsolidateInput, consolidation.ConsolidateResult, "bulk")
CONSOLIDATE_LOG = Verb(
    "consolidation", "consolidate_log", consolidation.ConsolidateLogInput,
    consolidation.ConsolidateLogResult, "admin",
)
CONSOLIDATE_UNDO = Verb(
    "consolidation", "consolidate_undo", consolidation.ConsolidateUndoInput,
    consolidation.ConsolidateUndoResult, "bulk",
)
BRIEF = Verb("consolidation", "brief", consolidation.BriefInput, consolidation.BriefResult, "read")
# Abstracts by the user's own model (echo-memory consolidate abstract): what to send, the checked
# store (the server enforces every check; it never calls a model), and the listing.
ABSTRACT_CANDIDATES = Verb(
    "consolidation", "abstract_candidates", consolidation.AbstractCandidatesInput,
    consolidation.AbstractCandidatesResult, "read",
)
WRITE_ABSTRACT = Verb(
    "consolidation", "write_abstract", consolidation.WriteAbstractInput, consolidation.WriteAbstractResult, "write",
)
DIGEST_ABSTRACTS = Verb(
    "consolidation", "digest_abstracts", consolidation.DigestAbstractsInput, consolidation.DigestAbstractsResult,
    "read",
)

VERBS: tuple[Verb[Any, Any], ...] = (
    WRITE_EPISODE, RECORD_RECALL_SAVE, PENDING_DOCUMENTS, MARK_INGESTED, REGISTER_DOCUMENTS, TOKEN_CREATE,
    TOKEN_VERIFY, TOKEN_LIST, TOKEN_REVOKE, SCOPE_CREATE, STATUS, TOKEN_GRANT, SCOPE_LIST, SCOPE_SHOW,
    SCOPE_DELETE, IMPORT_EPISODES, CALIBRATE, PENDING_EPISODES, MARK_DISTILLED, UNHINTED_FACTS,
    ADD_CAUSAL_HINTS, CLEAR_POST_HOC, FORGET, FORGET_FINISH, FORGET_LOG, ENTITY_DEFERRED, ENTITY_MERGE,
    ENTITY_UNMERGE, ENTITY_RENAME, END_FACTS, QUERY_MEMORY, TRACE_CAUSE, GET_AUDIT_LOG, WHY, AUDIT_EXPORT,
    AUDIT_IMPORT_STAGE, AUDIT_IMPORT, HEALTH, DASHBOARD_GRAPH, ENTITY_FACTS, RECALL_COST, REINDEX, LEXICAL_STATUS,
    CONSOLIDATE, CONSOLIDATE_LOG, CONSOLIDATE_UNDO, BRIEF, ABSTRACT_CANDIDATES, WRITE_ABSTRACT, DIGEST_ABSTRACTS,
)

_BY_NAME: dict[tuple[str, str], Verb[Any, Any]] = {(v.service, v.name): v for v in VERBS}


def verb(service: str, name: str) -> Verb[Any, Any]:
    """The verb `name` of `service`; KeyError when the table has no such verb."""
    return _BY_NAME[(service, name)]


def verbs_of(service: str) -> tuple[Verb[Any, Any], ...]:
    """Every verb `service` answers, in table order (empty for an unknown service)."""
    return tuple(v for v in VERBS if v.service == service)
