"""Can any node ever hold a task? The resource check of a campaign, before anything runs (pure).

Ray places a task only on one node that has every resource it asks for; a
task no node can hold (``NPU: 16`` on 8-NPU servers, ``CPU: 4`` on 1-CPU
nodes) would wait forever while the other tasks finish. So before a campaign
creates its root, each task's resources are compared with the cluster:

* ``fits``: an alive node holds all of it (it may still queue behind others);
* ``later``: no alive node does, but a node type of the autoscaler (where Ray
  reports them) does: the task is ``pending_unsatisfiable`` until such a node
  joins, for at most the campaign's ``node_wait_s``;
* ``never``: neither: the campaign is refused naming the task, the resource and
  the largest node (:func:`refusal`); when several tasks are, every one of them
  is named, one line each, then a summary line (:func:`refusals`), so the user
  does not learn of the next one only after fixing the first.

A task that spans ``hosts`` hosts needs one bundle (its resources) on each of
that many nodes (Ray's ``STRICT_SPREAD``): it fits when that many alive nodes
each hold a bundle, and is refused only when fewer than ``hosts`` nodes (alive,
or that the autoscaler may still add) could ever hold one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sk_analytics.errors import InputError

FITS, LATER, NEVER = "fits", "later", "never"


@dataclass(frozen=True)
class NodeCapacity:
    """A node (or an autoscaler node type) and the total resources it declares."""

    name: str
    resources: Mapping[str, float]
    count: int | None = 1
    """How many such nodes there are or may come (an autoscaler node type's ``max_count``; None: no limit)."""


@dataclass(frozen=True)
class Capacity:
    """What a cluster can hold: its alive nodes and the node types its autoscaler may add."""

    nodes: tuple[NodeCapacity, ...]
    node_types: tuple[NodeCapacity, ...] = ()


@dataclass(frozen=True)
class Shortfall:
    """Why no node can hold a task: the resource, what the task needs, the largest node's amount and name."""

    resource: str
    needed: float
    largest: float
    node: str | None


def holds(node: NodeCapacity, need: Mapping[str, float]) -> bool:
    """Whether ``node`` alone has every resource of ``need``."""
    return all(node.resources.get(key, 0.0) >= amount for key, amount in need.items() if amount > 0)


def shortfall(need: Mapping[str, float], nodes: Sequence[NodeCapacity]) -> Shortfall:
    """The resource to name when no node of ``nodes`` holds ``need``: the first (by name) that no node
    has enough of, with the node that has the most of it; when each resource exists somewhere but
    never together, the first resource the best-fitting node lacks."""
    wanted = sorted((key, amount) for key, amount in need.items() if amount > 0)
    for key, amount in wanted:
        best = max(nodes, key=lambda n: n.resources.get(key, 0.0), default=None)
        largest = 0.0 if best is None else best.resources.get(key, 0.0)
        if largest < amount:
            return Shortfall(key, amount, largest, None if best is None else best.name)
    best = max(nodes, key=lambda n: sum(n.resources.get(k, 0.0) >= a for k, a in wanted))
    key, amount = next((k, a) for k, a in wanted if best.resources.get(k, 0.0) < a)
    return Shortfall(key, amount, best.resources.get(key, 0.0), best.name)


def holders(need: Mapping[str, float], nodes: Sequence[NodeCapacity], hosts: int) -> int:
    """How many of ``nodes`` could each hold ``need`` (at most ``hosts``: a node type without a limit counts for all)."""
    return min(hosts, sum(hosts if node.count is None else node.count for node in nodes if holds(node, need)))


def pending_shortfall(need: Mapping[str, float], capacity: Capacity, hosts: int = 1) -> Shortfall:
    """What the alive nodes lack for a task that cannot start yet: a resource no alive node has enough of, or for
    a multi-host task whose bundle some nodes hold, the hosts (needed, and how many alive nodes hold one)."""
    alive = holders(need, capacity.nodes, hosts)
    if hosts > 1 and alive:
        return Shortfall("hosts", float(hosts), float(alive), None)
    return shortfall(need, capacity.nodes)


def classify(need: Mapping[str, float], capacity: Capacity, hosts: int = 1) -> str:
    """:data:`FITS`, :data:`LATER` or :data:`NEVER` (module docstring); ``need`` is one host's bundle."""
    if not any(amount > 0 for amount in need.values()):
        return FITS
    alive = holders(need, capacity.nodes, hosts)
    if alive >= hosts:
        return FITS
    return LATER if alive + holders(need, capacity.node_types, hosts) >= hosts else NEVER


def _amount(value: float) -> str:
    return f"{value:g}"


def refusal(task_id: str, need: Mapping[str, float], capacity: Capacity, source: str, hosts: int = 1) -> InputError:
    """The bad-input error (exit 2) for a task no node (for a multi-host task: too few nodes) can ever hold."""
    every = (*capacity.nodes, *capacity.node_types)
    able = [node.name for node in every if holds(node, need)]
    if hosts > 1 and able:
        bundle = ", ".join(f"{key}: {_amount(amount)}" for key, amount in sorted(need.items()) if amount > 0)
        return InputError(source, f"task {task_id} needs {hosts} hosts with {bundle} each (one per node, STRICT_SPREAD) but only "
                                  f"{len(able)} node(s) can ever hold one ({', '.join(able)})",
                          expected=f"at least {hosts} nodes that each hold one host's resources")
    short = shortfall(need, every)
    where = "no alive node" + (" and no autoscaler node type" if capacity.node_types else "")
    largest = "there is no node" if short.node is None else f"the largest node, {short.node}, has {short.resource}: {_amount(short.largest)}"
    return InputError(source, f"task {task_id} needs {short.resource}: {_amount(short.needed)} but {where} can ever hold it ({largest})",
                      expected="task resources that one node of the cluster has")


def refusals(never: Sequence[tuple[str, Mapping[str, float]]], total: int, capacity: Capacity, source: str,
             hosts: Mapping[str, int] | None = None) -> InputError:
    """The bad-input error for the tasks ``never`` no node can ever hold (of ``total``): :func:`refusal`
    for one; for several, each one's refusal as a detail line and a summary naming them all."""
    spans = hosts or {}
    errors = [refusal(task_id, need, capacity, source, spans.get(task_id, 1)) for task_id, need in never]
    if len(errors) == 1:
        return errors[0]
    names = ", ".join(task_id for task_id, _ in never)
    summary = InputError(source, f"{len(never)} of {total} tasks can never be held by one node ({names})",
                         expected="task resources that one node of the cluster has")
    summary.details = tuple(error.one_line() for error in errors)
    return summary


def check_tasks(tasks: Sequence[tuple[str, Mapping[str, float]]], capacity: Capacity, source: str,
                hosts: Mapping[str, int] | None = None) -> dict[str, str]:
    """Each task's class (``hosts``: the tasks that span hosts, and how many); the tasks no node (too few nodes)
    can ever hold raise :func:`refusals` (every one of them)."""
    spans = hosts or {}
    classes = {task_id: classify(need, capacity, spans.get(task_id, 1)) for task_id, need in tasks}
    never = [(task_id, need) for task_id, need in tasks if classes[task_id] == NEVER]
    if never:
        raise refusals(never, len(tasks), capacity, source, spans)
    return classes
