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
call's answer until a deadline; if the actor is still pending then, without
a process (Ray found no node with room), the handle raises
:class:`ClusterError` naming what the actor asks for and what the cluster
has free, and -- when this actor never ran -- removes it, so its name does
not stay taken by an actor nobody waits for (the next connect creates it
afresh).  An actor that is starting (its process runs ``__init__``) or
running a long call is waited for as before: only the lack of room is
bounded.  The actor's state comes from Ray's GCS (``ray._private.state``,
the table ``ray list actors`` reads; the public state API needs the
dashboard, which a cluster may run without); Ray is pinned to 2.60.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import structlog

from actormem.cluster._spec import AgentSpec, ClusterError

__all__ = ["asked_for", "no_room", "wait_started"]

log = structlog.get_logger(__name__)

#: Actor states in which it has no process yet; with Pid 0 Ray has found no node for it.
_PENDING = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "RESTARTING")


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


def _state(actor: Any) -> tuple[str, int]:
    """The actor's state in Ray's GCS and its process id (0: none yet)."""
    from ray._private import state

    info = state.actors(actor_id=actor._actor_id.hex())
    return str(info.get("State", "")), int(info.get("Pid") or 0)


def _no_process(actor: Any, wanted: Mapping[str, float] | None = None) -> tuple[bool, str]:
    """Whether the actor waits for a node with room, and its state.

    Pending without a process: Ray found no node for it.  Restarting (its
    node died; Ray keeps the old process id): when the cluster has less of
    a resource free than it asks for.
    """
    try:
        name, pid = _state(actor)
    except Exception as exc:  # a Ray without that table: say what is known
        log.warning("cluster.actor_state_unknown", error=repr(exc))
        return False, "unknown"
    if name == "RESTARTING" and pid != 0:
        free = _ray().available_resources()
        return any(float(free.get(k, 0)) < v for k, v in (wanted or {}).items()), name
    return name in _PENDING and pid == 0, name


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

    Returns when the answer is there, or when the actor has a process (it
    starts, or runs a long call: the caller then waits for the answer as
    before).

    Raises:
        ClusterError: at the deadline the actor is still pending for lack
            of room (the message names what it asks for and what is free);
            an actor that never ran is removed first, freeing its name.
    """
    ray = _ray()
    if ref is not None:
        ready, _ = ray.wait([ref], timeout=max(0.0, deadline - time.monotonic()))
        if ready:
            return
    wanted = asked_for(actor_options)
    waiting, state = _no_process(actor, wanted)
    if not waiting:
        return
    if state != "RESTARTING":  # never ran: nobody else's agent; a restarting one stays Ray's
        ray.kill(actor, no_restart=True)
    message = no_room(spec, wanted, what, state)
    log.warning("cluster.no_room", session_id=spec.session_id, state=state, why=message)
    raise ClusterError(message)
