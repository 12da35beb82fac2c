"""Waiting for room: an agent's actor that no node can hold yet.

A user bounds how many agents a node holds with Ray's own resources: nodes
started with a capacity (``ray start --resources='{"agent": 8}'``, or
``--memory``) and agents that ask for a share of it
(``actor_options={"resources": {"agent": 1}}`` or ``{"memory": ...}``).
Ray then schedules an agent's actor only on a node with room, and keeps it
pending while none has -- it starts as soon as an agent ends (an idle
release or ``stop()``) and frees its share.

A pending actor answers nothing, so a call sent to it waits as long as it
is pending; this module bounds that wait.  :func:`wait_started` waits for a
call's answer until a deadline; if the actor then still waits for room,
the handle raises :class:`ClusterError` naming what the actor asks for and
what the cluster has free, and -- when this actor never ran -- removes it,
so its name does not stay taken by an actor nobody waits for (the next
connect creates it afresh).

**Waiting for room or starting.**  Ray's actor table does not say which:
an actor whose lease waits in a raylet's queue for lack of room and one
whose lease was granted while the raylet boots its worker process look the
same there (state ``PENDING_CREATION``, process id 0, an empty worker
address, the owner's node -- measured on Ray 2.60, two nodes; the process
id appears once the worker is leased, before ``__init__`` runs, so an
actor running a slow ``__init__`` already has one).  What tells them apart
is the raylets' resource load, which counts the leases queued for lack of
room (or infeasible) by resource shape: an actor without a process waits
for room only when the queued leases of its shape account for every actor
of that shape without a process (:func:`_no_process`), in two checks a
second apart (the raylets report their queues a moment late: a lease just
granted may still be counted); otherwise one of them is starting, and none
is removed.  An actor that is starting -- its
worker boots, or ``__init__`` runs (the take-over, the fence, the model)
-- is given up to ``STARTING_GRACE`` seconds past the deadline, checked
again each second, and is never removed: past that bound the caller gets a
:class:`ClusterError` saying it is still starting, and the next connect
finds it.  An actor that runs (a long call) is waited for as before: only
the lack of room and a start are bounded.

The states come from Ray's GCS (``ray._private.state``'s accessor, what
``ray list actors`` and ``ray status`` read; the public state API needs the
dashboard, which a cluster may run without); Ray is pinned to 2.60.  Known
limit: tasks queued with exactly an agent's resource shape count as queued
leases, so an agent whose worker boots past the deadline beside them can be
taken for one waiting for room.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping
from typing import Any, Final

import structlog

from actormem.cluster._spec import AgentSpec, ClusterError

__all__ = ["asked_for", "no_room", "wait_started"]

log = structlog.get_logger(__name__)

#: Actor states in which it has no process of its own yet, or may wait for a node.
_PENDING = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "RESTARTING")
#: How long past its deadline an actor that is starting (its worker boots, or its
#: ``__init__`` runs) is waited for before the caller is told it is still starting.
STARTING_GRACE: Final = 300.0
#: How often a starting actor is checked again (a wait on the call's answer meanwhile).
_RECHECK = 1.0


def asked_for(actor_options: Mapping[str, Any]) -> dict[str, float]:
    """The resources an agent's actor asks Ray for (its ``.options()`` as the handle sets them)."""
    wanted: dict[str, float] = {}
    for option, resource in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
        value = actor_options.get(option)
        if isinstance(value, int | float) and value > 0:
            wanted[resource] = float(value)
    resources = actor_options.get("resources")
    if isinstance(resources, Mapping):
        for name, value in resources.items():
            if isinstance(value, int | float) and value > 0:
                wanted[str(name)] = float(value)
    return wanted


def _ray() -> Any:
    import ray

    return ray


def _accessor() -> Any:
    from ray._private import state

    return state.state._connect_and_get_accessor()


def _gcs() -> Any:
    """Ray's GCS protobuf messages (no type stubs)."""
    return importlib.import_module("ray.core.generated.gcs_pb2")


def _shape(resources: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, round(float(v), 4)) for k, v in resources.items() if v > 0))


def _table(actor: Any) -> tuple[str, int, tuple[tuple[str, float], ...]]:
    """The actor's state in Ray's GCS, its process id (0: none yet) and its resource shape."""
    gcs_pb2 = _gcs()
    raw = _accessor().get_actor_info(actor._actor_id)
    if raw is None:  # not registered with the GCS yet
        return "DEPENDENCIES_UNREADY", 0, ()
    data = gcs_pb2.ActorTableData.FromString(raw)
    state = gcs_pb2.ActorTableData.ActorState.Name(data.state)
    return state, int(data.pid), _shape(dict(data.required_resources))


def _state(actor: Any) -> tuple[str, int]:
    """The actor's state in Ray's GCS and its process id (0: none yet)."""
    state, pid, _ = _table(actor)
    return state, pid


def _queued(shape: tuple[tuple[str, float], ...]) -> int:
    """Leases of ``shape`` the raylets hold queued for lack of room (or infeasible)."""
    gcs_pb2 = _gcs()
    batch = gcs_pb2.ResourceUsageBatchData.FromString(_accessor().get_all_resource_usage())
    return sum(
        d.num_ready_requests_queued + d.num_infeasible_requests_queued + d.backlog_size
        for node in batch.batch
        for d in node.resource_load_by_shape.resource_demands
        if _shape(dict(d.shape)) == shape
    )


def _unplaced(shape: tuple[tuple[str, float], ...]) -> int:
    """Actors of ``shape`` without a process of their own: pending without one, or restarting."""
    gcs_pb2 = _gcs()
    accessor = _accessor()
    count = 0
    for state in _PENDING:
        for raw in accessor.get_actor_table(None, state):
            data = gcs_pb2.ActorTableData.FromString(raw)
            if (state == "RESTARTING" or data.pid == 0) and _shape(
                dict(data.required_resources)
            ) == shape:
                count += 1
    return count


def _no_process(actor: Any, wanted: Mapping[str, float] | None = None) -> tuple[bool, str]:
    """Whether the actor waits for a node with room, and its state.

    Pending with a process: starting (``__init__`` runs), not waiting.
    Without one, or restarting (its node died; Ray keeps the old process
    id): waiting only when the raylets' queued leases of its resource shape
    account for every actor of that shape in that case (see the module
    docstring); otherwise one of them is starting.  ``wanted`` is unused
    (kept for callers): the shape is the one Ray holds for the actor.
    """
    try:
        name, pid, shape = _table(actor)
        if name not in _PENDING or (name != "RESTARTING" and pid != 0):
            return False, name
        queued = _queued(shape)
        return queued > 0 and queued >= _unplaced(shape), name
    except Exception as exc:  # a Ray without these tables: say what is known
        log.warning("cluster.actor_state_unknown", error=repr(exc))
        return False, "unknown"


def no_room(spec: AgentSpec, wanted: Mapping[str, float], what: str, state: str) -> str:
    """Why the agent's actor cannot start: what it asks for against what the cluster has."""
    ray = _ray()
    total = ray.cluster_resources()
    free = ray.available_resources()
    nodes = ray.nodes()
    parts = []
    for name, amount in wanted.items():
        largest = max(
            (float(n.get("Resources", {}).get(name, 0)) for n in nodes if n.get("Alive")),
            default=0.0,
        )
        if largest < amount:
            parts.append(f"{name} {amount:g}: no node has that much (infeasible on this cluster)")
        else:
            parts.append(
                f"{name} {amount:g}: {float(free.get(name, 0)):g} of {float(total.get(name, 0)):g}"
                " free in the cluster"
            )
    asks = "; ".join(parts) if parts else "no resources (Ray could not place it)"
    doing = "restarting (its node was lost)" if state == "RESTARTING" else "pending"
    remedy = (
        "start nodes that have it (ray start --resources=... / --num-gpus) or ask for less"
        if "infeasible" in asks
        else "an agent's idle release or stop() frees its share"
    )
    return (
        f"the agent {spec.session_id!r} {what}: its actor is {doing}, no node has room for it "
        f"({asks}); {remedy}"
    )


def wait_started(
    ref: Any,
    actor: Any,
    spec: AgentSpec,
    actor_options: Mapping[str, Any],
    deadline: float,
    what: str,
) -> None:
    """Wait for ``ref`` (a call to ``actor``) until ``deadline`` while the actor waits for room.

    With ``ref`` None, only the check at the deadline (now).

    Returns when the answer is there, or when the actor runs (a long call:
    the caller then waits for the answer as before).  An actor that is
    starting at the deadline (not waiting for room) is given up to
    ``STARTING_GRACE`` seconds more.

    Raises:
        ClusterError: at the deadline (or later, while it was starting) the
            actor is still pending for lack of room (the message names what
            it asks for and what is free); an actor that never ran is
            removed first, freeing its name.  Or it is still starting
            ``STARTING_GRACE`` past the deadline (it is not removed).
    """
    ray = _ray()
    if ref is not None:
        ready, _ = ray.wait([ref], timeout=max(0.0, deadline - time.monotonic()))
        if ready:
            return
    wanted = asked_for(actor_options)
    bound = deadline + STARTING_GRACE
    seen_waiting = False
    while True:
        waiting, state = _no_process(actor, wanted)
        # twice in a row, a second apart: the raylets report their queues a moment late,
        # so a lease granted just now (its worker booting) may still be counted as queued
        if waiting and (seen_waiting or ref is None):
            break
        if not waiting and (ref is None or state not in _PENDING):
            return  # a check only, or it runs (a long call): the caller waits for it
        seen_waiting = waiting
        left = bound - time.monotonic()
        if left <= 0:  # starting all this time: not removed (the next connect finds it)
            message = (
                f"the agent {spec.session_id!r} {what}: its actor is still starting (Ray state "
                f"{state}: its worker process boots or its __init__ runs) "
                f"{STARTING_GRACE:g}s past that; it is not removed, a later call or connect "
                "reaches it once it has started"
            )
            log.warning("cluster.still_starting", session_id=spec.session_id, state=state)
            raise ClusterError(message)
        ready, _ = ray.wait([ref], timeout=min(_RECHECK, left))  # starting: more time
        if ready:
            return
    if state != "RESTARTING":  # never ran: nobody else's agent; a restarting one stays Ray's
        ray.kill(actor, no_restart=True)
    message = no_room(spec, wanted, what, state)
    log.warning("cluster.no_room", session_id=spec.session_id, state=state, why=message)
    raise ClusterError(message)
