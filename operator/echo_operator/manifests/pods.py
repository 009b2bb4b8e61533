"""Settings every pod the operator makes gets: pull secrets, scheduling, resources, pod metadata.

The chart passes them as one JSON document (``ECHO_OPERATOR_POD_SETTINGS``, from ``operator.managedPods``
values), so a platform team schedules the migration Jobs and the Postgres pods as it schedules the rest.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_JOB_RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
DEFAULT_POSTGRES_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


class PodSettings(BaseModel):
    """What is added to every operator-made pod template (Kubernetes field names)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    image_pull_secrets: list[dict[str, str]] = Field(default_factory=list, alias="imagePullSecrets")
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)
    priority_class_name: str | None = Field(None, alias="priorityClassName")
    pod_annotations: dict[str, str] = Field(default_factory=dict, alias="podAnnotations")
    pod_labels: dict[str, str] = Field(default_factory=dict, alias="podLabels")
    job_resources: dict[str, Any] = Field(default_factory=lambda: copy.deepcopy(DEFAULT_JOB_RESOURCES),
                                          alias="jobResources")
    postgres_resources: dict[str, Any] = Field(default_factory=lambda: copy.deepcopy(DEFAULT_POSTGRES_RESOURCES),
                                               alias="postgresResources")

    def apply(self, template: dict[str, Any]) -> dict[str, Any]:
        """``template`` (a pod template: metadata + spec) with these settings merged in; returned for chaining.

        The operator's own labels win over ``podLabels`` (selectors depend on them).
        """
        meta = template.setdefault("metadata", {})
        if self.pod_labels:
            meta["labels"] = {**self.pod_labels, **(meta.get("labels") or {})}
        if self.pod_annotations:
            meta["annotations"] = {**self.pod_annotations, **(meta.get("annotations") or {})}
        spec = template.setdefault("spec", {})
        if self.image_pull_secrets:
            spec["imagePullSecrets"] = copy.deepcopy(self.image_pull_secrets)
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            spec["tolerations"] = copy.deepcopy(self.tolerations)
        if self.affinity:
            spec["affinity"] = copy.deepcopy(self.affinity)
        if self.priority_class_name:
            spec["priorityClassName"] = self.priority_class_name
        return template
