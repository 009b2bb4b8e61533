"""Every verb of every service, listed once: who answers it, its argument and result models, its time-out.

Callers (the edge, the CLI) and services both import this table: the edge publishes the models as
tool schemas and sends requests to the service named here; a service builds one subscriber per verb
it lists here and refuses to start if its routes and this table disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


@dataclass(frozen=True)
class Verb:
    service: str
    name: str
    input: type[BaseModel]
    output: type[BaseModel]
    timeout: TimeoutKind  # a field of echo_memory.libs.core.config.Timeouts


VERBS: tuple[Verb, ...] = (
    Verb("writes", "write_episode", write.WriteEpisodeInput, write.WriteEpisodeResult, "write"),
    Verb("writes", "record_recall_save", documents.RecordRecallSaveInput, documents.RecordRecallSaveResult, "write"),
    Verb("writes", "pending_documents", documents.PendingDocumentsInput, documents.PendingDocumentsResult, "read"),
    Verb("writes", "mark_ingested", documents.MarkIngestedInput, documents.MarkIngestedResult, "write"),
    Verb("writes", "register_documents", documents.RegisterDocumentsInput, documents.RegisterDocumentsResult, "bulk"),
    Verb("writes", "token_create", admin.TokenCreateInput, admin.TokenCreateResult, "admin"),
    Verb("writes", "token_verify", admin.TokenVerifyInput, admin.TokenVerifyResult, "auth"),
    Verb("writes", "token_list", admin.NoArgs, admin.TokenListResult, "admin"),
    Verb("writes", "token_revoke", admin.TokenRevokeInput, admin.TokenRevokeResult, "admin"),
    Verb("writes", "scope_create", admin.ScopeCreateInput, admin.ScopeCreateResult, "admin"),
    Verb("writes", "status", admin.NoArgs, admin.StatusResult, "admin"),
    Verb("writes", "token_grant", admin.TokenGrantInput, admin.TokenGrantResult, "admin"),
    Verb("writes", "scope_list", admin.NoArgs, admin.ScopeListResult, "admin"),
    Verb("writes", "scope_show", admin.ScopeNameInput, admin.ScopeShowResult, "admin"),
    Verb("writes", "scope_delete", admin.ScopeNameInput, admin.ScopeDeleteResult, "admin"),
    Verb("writes", "import_episodes", imports.ImportEpisodesInput, imports.ImportEpisodesResult, "bulk"),
    Verb("writes", "calibrate", calibration.CalibrateInput, calibration.CalibrateResult, "bulk"),
    Verb("writes", "pending_episodes", distil.PendingEpisodesInput, distil.PendingEpisodesResult, "read"),
    Verb("writes", "mark_distilled", distil.MarkDistilledInput, distil.MarkDistilledResult, "write"),
    # The opt-in model commands' (echo-memory infer-causal-hints, distil --clear); admin only.
    Verb("writes", "unhinted_facts", post_hoc.UnhintedFactsInput, post_hoc.UnhintedFactsResult, "read"),
    Verb("writes", "add_causal_hints", post_hoc.AddCausalHintsInput, post_hoc.AddCausalHintsResult, "write"),
    Verb("writes", "clear_post_hoc", post_hoc.ClearPostHocInput, post_hoc.ClearPostHocResult, "bulk"),
    # Erasure (echo-memory forget), admin only: erase in one transaction, then vacuum and clean the stream.
    Verb("writes", "forget", forget.ForgetInput, forget.ForgetResult, "bulk"),
    Verb("writes", "forget_finish", forget.ForgetFinishInput, forget.ForgetFinishResult, "bulk"),
    Verb("writes", "forget_log", forget.ForgetLogInput, forget.ForgetLogResult, "admin"),
    # A person fixes entity identity (echo-memory entities ...); admin only.
    Verb("writes", "entity_deferred", entities.EntityDeferredInput, entities.EntityDeferredResult, "admin"),
    Verb("writes", "entity_merge", entities.EntityMergeInput, entities.EntityMergeResult, "admin"),
    Verb("writes", "entity_unmerge", entities.EntityUnmergeInput, entities.EntityUnmergeResult, "admin"),
    Verb("writes", "entity_rename", entities.EntityRenameInput, entities.EntityRenameResult, "admin"),
    # `import --from` replaying another memory system's deletions; not an MCP tool.
    Verb("writes", "end_facts", end_facts.EndFactsInput, end_facts.EndFactsResult, "write"),
    Verb("retrieval", "query_memory", query.QueryMemoryInput, query.QueryMemoryResult, "read"),
    Verb("causal", "trace_cause", causal.TraceCauseInput, causal.TraceCauseResult, "read"),
    Verb("audit", "get_audit_log", audit.GetAuditLogInput, audit.GetAuditLogResult, "read"),
    Verb("audit", "why", audit.WhyInput, audit.WhyResult, "read"),
    Verb("audit", "export", audit.ExportInput, audit.ExportPage, "bulk"),
    Verb("audit", "import_stage", audit.ImportStageInput, audit.ImportStageResult, "bulk"),
    Verb("audit", "import", audit.ImportInput, audit.ImportResult, "bulk"),
    Verb("audit", "health", health.HealthInput, health.HealthResult, "admin"),
    # A whole-graph aggregation (clusters and layout), like `status` an admin-class time-out, not a point read's.
    Verb("audit", "dashboard_graph", dashboard.GraphInput, dashboard.GraphResult, "admin"),
    Verb("audit", "entity_facts", dashboard.EntityFactsInput, dashboard.EntityFactsResult, "read"),
    Verb("audit", "recall_cost", dashboard.RecallCostInput, dashboard.RecallCostResult, "read"),
    Verb("reindex", "reindex", reindex.ReindexInput, reindex.ReindexResult, "bulk"),
    Verb("reindex", "lexical_status", reindex.LexicalStatusInput, reindex.LexicalStatusResult, "read"),
    Verb("consolidation", "consolidate", consolidation.ConsolidateInput, consolidation.ConsolidateResult, "bulk"),
    Verb("consolidation", "consolidate_log", consolidation.ConsolidateLogInput, consolidation.ConsolidateLogResult,
         "admin"),
    Verb("consolidation", "consolidate_undo", consolidation.ConsolidateUndoInput, consolidation.ConsolidateUndoResult,
         "bulk"),
    Verb("consolidation", "brief", consolidation.BriefInput, consolidation.BriefResult, "read"),
)

_BY_NAME: dict[tuple[str, str], Verb] = {(v.service, v.name): v for v in VERBS}


def verb(service: str, name: str) -> Verb:
    """The verb `name` of `service`; KeyError when the table has no such verb."""
    return _BY_NAME[(service, name)]


def verbs_of(service: str) -> tuple[Verb, ...]:
    """Every verb `service` answers, in table order (empty for an unknown service)."""
    return tuple(v for v in VERBS if v.service == service)
