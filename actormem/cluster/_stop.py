"""``RemoteRuntime.stop()``: end an agent for good, and know that it ended with everything saved.

Kept apart from :mod:`actormem.cluster._handle` (the calls and their
failover) because a stop cannot be read from the actor's death: an actor
that ends as it answers and an actor whose node died look the same to the
caller (Ray raises ``ActorDiedError`` for both, and ``ActorUnavailableError``
while it restarts -- both ``RayActorError``).  Reading every loss as the
stop's own exit lost a handle's unsaved changes silently and left Ray's
restart of the agent running (a hostile test of session 11).

So a stop has two steps.  The actor's ``stop`` saves everything (its own
state and every handle's changes on it), records its incarnation released
in the session, closes the runtime and *answers*: that answer is the
acknowledgement.  Then the handle's ``exit`` ends the actor (any other call
that comes first ends it too, and its caller reaches the agent again, as
one queued behind a stop always did).  When the actor is lost instead:

* before the stop answered, whether it saved is not known: the stop goes
  to whichever incarnation answers now (Ray's restart, or one created to
  ask), naming the incarnation this handle has unacknowledged changes on.
  The new one accepts it when that incarnation was released (its save
  landed: nothing lost); otherwise it refuses (``AgentRestartedError``), the
  handle stops it all the same, from its last acknowledged state, and
  raises ``AgentRestartedError``: the changes are lost, and it says so;
* after it answered (the node died before the exit), the restarted
  incarnation holds only what was saved: it is stopped (or removed, below)
  as well;
* a restart that has not finished starting (Ray's ``RESTARTING``: waiting
  for a node with room, or booting) answered no call, so it holds only what
  the session held: with nothing of this handle to save, it is removed
  (``ray.kill``, no restart) instead of waited for, so the stop ends the
  agent instead of leaving it to take a node's room later.

An actor of the agent's name with another actor id, found after a stop
answered, was created by another caller's call since: it is theirs, and
left running.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from actormem.cluster import _capacity, _connect
from actormem.cluster._connect import _MAX_BACKOFF, _lost_errors, _ray
from actormem.cluster._spec import RAY_NAMESPACE, AgentRestartedError, ClusterError, actor_name

if TYPE_CHECKING:
    from actormem.cluster._handle import RemoteRuntime

__all__ = ["stop"]

#: Ray's states of an actor whose (re)started incarnation has not finished ``__init__``:
#: it answered no call, so it holds only what its session held.
_NOT_RUN = ("RESTARTING", "PENDING_CREATION", "DEPENDENCIES_UNREADY")


def stop(h: RemoteRuntime, timeout: float | None) -> None:
    """Stop the agent of handle ``h`` (see :meth:`RemoteRuntime.stop`)."""
    lost_errors = _lost_errors()
    expect = h._expect()
    limit = float(h._connect_args["failover_timeout"])
    deadline = time.monotonic() + limit
    told: AgentRestartedError | None = None
    stopped: Any = None  # the actor id whose incarnation answered a stop
    actor: Any = h._actor
    pause = 0.02
    last: BaseException | None = None
    while True:
        if actor is None:
            actor = _to_stop(h, stopped)
            if actor is None and expect is None:
                break  # nothing of the agent runs, and nothing of this handle is unsaved
            if actor is None:  # ended: whether it saved this handle's changes, a new one says
                actor = _connect._get_or_create(h._spec, h._connect_args)
        if time.monotonic() >= deadline:
            raise ClusterError(
                f"the agent {h.session_id!r} could not be stopped within "
                f"failover_timeout={limit:g}s: {last}"
            ) from None
        h._actor = actor
        try:
            _stop_once(h, actor, timeout, expect, deadline)
        except AgentRestartedError as exc:  # restarted from its last acknowledged state
            if expect is not None and told is None:
                told = exc
            h._restarted()
            expect, actor = None, None
            continue
        except lost_errors as exc:  # lost before answering: whether it saved is unknown
            last, actor = exc, None
            time.sleep(pause)  # Ray gives no event for "restarted"; back off, bounded
            pause = min(pause * 2, _MAX_BACKOFF)
            continue
        # answered (or never ran): everything of it saved; a restart of it is stopped too
        stopped, expect, actor = actor._actor_id, None, None
    h._closed = True
    if told is not None:
        raise AgentRestartedError(
            f"the agent {h.session_id!r} was lost before stop() could save this handle's "
            "changes since its last flush()/save_session(): they are lost; the agent was "
            "stopped from its last acknowledged state",
            "stop",
        ) from told


def _stop_once(
    h: RemoteRuntime, actor: Any, timeout: float | None, expect: str | None, deadline: float
) -> None:
    """Stop one incarnation: it saves everything and answers (the acknowledgement),
    then its ``exit`` ends the actor.  A restart that has not started yet (waiting for
    a node with room, or booting) answered no call: with nothing of this handle to
    save, it is removed."""
    ray = _ray()
    if expect is None and _state_of(actor) in _NOT_RUN:
        ray.kill(actor, no_restart=True)  # holds nothing anyone handed it: nothing to save
        return
    h._get(h._bounded(actor.stop.remote(timeout, expect), deadline, "stop"))
    try:  # False: a restarted incarnation got it (stopped next)
        h._get(h._bounded(actor.exit.remote(), deadline, "stop"))
    except _lost_errors():
        pass  # it ended as it answered: that is the exit
    except ClusterError:
        # its node died after it answered, and Ray's restart of it waits for a node
        # with room: that incarnation answered no call (everything was saved): removed
        ray.kill(actor, no_restart=True)


def _state_of(actor: Any) -> str | None:
    """The actor's state in Ray's GCS, or None when the lookup itself failed (a node
    being lost): the stop then goes on by its calls, which say what happened."""
    try:
        return _capacity._state(actor)[0]
    except Exception:
        return None


def _to_stop(h: RemoteRuntime, stopped: Any) -> Any:
    """The agent's actor left to stop: None when none runs, or when the one running is
    not the actor whose incarnation answered a stop (another caller created it since)."""
    ray = _ray()
    try:
        found = ray.get_actor(actor_name(h._spec), namespace=RAY_NAMESPACE)
    except ValueError:
        return None
    if stopped is not None and found._actor_id != stopped:
        return None
    if _state_of(found) == "DEAD":  # ended; its name not yet freed
        return None
    return found
