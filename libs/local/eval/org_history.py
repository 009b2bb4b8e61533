"""A synthetic organisation's memory, as months of many agents' work would leave it.

For the consolidation benchmark: the store a team's agents build over a year, not a fresh store
nobody reads. Deterministic for a seed, so two runs compare like with like.

- **Agents and projects.** `agents` agents (each with a client tool) work on one to three of
  `projects` projects; a project has its own set of entities, so facts of one project share names.
- **Sessions.** Work comes in sessions: one agent, one project, one moment, a handful of facts about
  that project's entities, written together (one `write_episode`). Activity grows over the year
  (more sessions lately), as adoption does.
- **Supersession.** A share of facts restate an edge (source, target, relation) already written in
  the project with a new detail: the newer version ends the older one, as `write_episode` does.
- **Look-alike names.** Some entities have look-alikes in the same project: a version ("v2"), a
  qualifier ("(EU)"), a person named like a company ("Mercury" and "Mercury Jones"). `look_alikes`
  lists each group: distinct entities a digest must never mix.
- **Reads.** `reads` draws what agents recalled: recent facts of popular entities far more often
  than old ones, as a read log of a live store looks.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field

from echo_memory.libs.local.eval.synthetic import DETAILS, KINDS, PREFIXES, RELATIONS

TOOLS = ("claude-code", "cursor", "codex", "gemini-cli", "opencode", "vscode-copilot")
FACTS_PER_SESSION = (3, 12)  # inclusive bounds of a session's facts


@dataclass(frozen=True)
class OrgShape:
    agents: int = 120
    projects: int = 24
    entities_per_project: int = 90
    days: float = 365.0
    superseded_share: float = 0.08  # of facts, a new version of an earlier edge of the project
    look_alike_share: float = 0.06  # of a project's entities, the base of a look-alike group
    seed: int = 5


@dataclass(frozen=True)
class OrgFact:
    source: str
    target: str
    relation: str
    text: str
    agent: str
    tool: str
    project: str
    session: str
    age_days: float  # how long before "now" it was written (and became valid)
    replaces: int | None  # index of the earlier version of the same edge this one ends


@dataclass(frozen=True)
class OrgRead:
    age_days: float
    agent: str
    facts: tuple[int, ...]  # indexes of the facts returned, best first


@dataclass
class _Project:
    name: str
    entities: list[str]
    edges: dict[tuple[str, str, str], int] = field(default_factory=dict)  # current version of each edge
    order: list[tuple[str, str, str]] = field(default_factory=list)  # its edges, first written first


class OrgHistory:
    """`count` facts in the order they were written (oldest first, a year back to now), and the
    look-alike groups. A store of another size is another organisation: build another history."""

    def __init__(self, count: int, shape: OrgShape | None = None) -> None:
        self.shape = shape or OrgShape()
        self._rng = random.Random(self.shape.seed)
        self.look_alikes: list[tuple[str, ...]] = []
        self._projects = [self._project(i) for i in range(self.shape.projects)]
        self._group_of = {name: i for i, group in enumerate(self.look_alikes) for name in group}
        self._agents = [(f"agent-{i:03d}", TOOLS[i % len(TOOLS)],
                         self._rng.sample(range(self.shape.projects), k=min(self.shape.projects, 1 + i % 3)))
                        for i in range(self.shape.agents)]
        self._all_edges: set[tuple[str, str, str]] = set()
        self.facts: list[OrgFact] = []
        session = 0
        while len(self.facts) < count:
            session += 1
            self._session(session, min(count - len(self.facts), self._rng.randint(*FACTS_PER_SESSION)),
                          self._age(len(self.facts) / count))

    def _project(self, index: int) -> _Project:
        name = f"project-{index:02d}"
        bases = self._rng.sample([f"{p} {k}" for p in PREFIXES for k in KINDS], self.shape.entities_per_project)
        entities = list(bases)
        for base in bases[: max(1, round(len(bases) * self.shape.look_alike_share))]:
            prefix, kind = base.split(" ", 1)
            group = (base, f"{base} v2", f"{base} (EU)") if kind != "team" else (prefix, f"{prefix} Jones")
            entities += [n for n in group if n not in entities]
            self.look_alikes.append(tuple(dict.fromkeys(group)))
        return _Project(name, entities)

    def _alike(self, a: str, b: str) -> bool:
        group = self._group_of.get(a)
        return group is not None and group == self._group_of.get(b)

    def _age(self, done: float) -> float:
        # Activity grows with adoption: the written share rises as the square of elapsed time.
        return self.shape.days * (1.0 - math.sqrt(min(done, 1.0)))

    def _session(self, number: int, size: int, age: float) -> None:
        agent, tool, projects = self._agents[self._rng.randrange(len(self._agents))]
        project = self._projects[self._rng.choice(projects)]
        focus = self._rng.sample(project.entities, k=min(6, len(project.entities)))
        made = 0
        while made < size:
            fact = self._fact(project, focus, agent, tool, f"{agent}-s{number}", age)
            if fact is not None:
                self.facts.append(fact)
                made += 1

    def _fact(self, project: _Project, focus: list[str], agent: str, tool: str, session: str,
              age: float) -> OrgFact | None:
        edge = self._rng.choice(project.order) if project.order and \
            self._rng.random() < self.shape.superseded_share else None
        if edge is not None and self.facts[project.edges[edge]].session != session:
            replaces: int | None = project.edges[edge]
            source, target, relation = edge
        else:
            source = self._rng.choice(focus)
            # Never an edge between two look-alikes: a fact naming both would join them legitimately,
            # and the false-merge probe counts any digest that holds two of a group.
            target = self._rng.choice([e for e in project.entities if e != source and not self._alike(source, e)])
            relation = self._rng.choice(RELATIONS)[0]
            replaces = None
            if (source, target, relation) in self._all_edges:
                return None  # an edge is new to the whole store unless it is a deliberate new version
        template = next(t for r, t, _ in RELATIONS if r == relation)
        text = template.format(s=source, o=target, d=self._rng.choice(DETAILS))
        if replaces is not None and text == self.facts[replaces].text:
            return None  # the same sentence again is no new version
        if replaces is None:
            self._all_edges.add((source, target, relation))
            project.order.append((source, target, relation))
        project.edges[(source, target, relation)] = len(self.facts)
        return OrgFact(source, target, relation, text, agent, tool, project.name, session, age, replaces)

    def sessions(self) -> list[list[int]]:
        """Indexes of the facts, grouped by session in writing order."""
        groups: dict[str, list[int]] = {}
        for index, fact in enumerate(self.facts):
            groups.setdefault(fact.session, []).append(index)
        return list(groups.values())

    def successors(self) -> dict[int, int]:
        """For every fact a later version ended, the index of that version."""
        return {f.replaces: i for i, f in enumerate(self.facts) if f.replaces is not None}

    def reads(self, count: int, seed: int = 9, per_read: int = 5) -> list[OrgRead]:
        """`count` reads over the facts so far: recent facts of popular entities first."""
        rng = random.Random(seed)
        popularity: dict[str, float] = {}
        for project in self._projects:  # Zipf over each project's entities
            for rank, name in enumerate(project.entities, start=1):
                popularity[name] = max(popularity.get(name, 0.0), 1.0 / rank)
        weights = [popularity.get(f.source, 0.0) * math.exp(-f.age_days / 30.0) for f in self.facts]
        cumulative = list(itertools.accumulate(weights))
        everyone = range(len(self.facts))
        out = []
        for _ in range(count):
            picked = rng.choices(everyone, cum_weights=cumulative, k=per_read)
            age = min(self.facts[i].age_days for i in picked) * rng.random()
            out.append(OrgRead(age, self._agents[rng.randrange(len(self._agents))][0], tuple(dict.fromkeys(picked))))
        return out


def entity_type(name: str) -> str:
    """The type a generated name is declared with: its kind word, else a person (two words) or a company."""
    words = name.split()
    kinds = [w for w in words if w in KINDS]
    return kinds[0] if kinds else ("person" if len(words) == 2 else "company")


__all__ = ["OrgFact", "OrgHistory", "OrgRead", "OrgShape", "entity_type"]
