"""Agents' memory runtimes hosted in Ray actors: same API, reached by name, failover.

Install with ``pip install 'actormem[ray]'``; nothing outside this package
imports Ray.

One Ray actor per agent (namespace + session id) hosts a
:class:`~actormem.runtime.MemoryRuntime`.  :meth:`RemoteRuntime.connect`
gets or creates it (named, detached, in the Ray namespace ``actormem``), so
every driver, task or Serve replica that asks for the same agent reaches
the same actor, and the handle has the runtime's calls, sync and asyncio.
A ``ReActAgent`` runs with the handle as its memory unchanged.

**Backends.**  An actor restarts on another node when its node dies, so the
agent's state must not live on a node's disk: on a cluster of more than
one node, the store and the sessions must be PostgreSQL
(``store='postgresql://...'``, ``sessions='postgresql://...'``); a DuckDB
path, a session folder or a journal is refused (:class:`ClusterConfigError`).

**Acknowledged, remotely.**  A returned ``flush()`` commits the recorded
turns *and* saves the agent's session; a returned ``save_session()`` saves
its short-term state.  That state is what a restarted actor restores: it is
never lost, even when the node is killed right after.  With
``write_through=True`` every returned call is acknowledged (the session is
saved after each short-term change, ``record`` flushes) at the cost of a
PostgreSQL write per call.  A call in flight when the node dies is sent
again to the restarted actor when it is safe to repeat (reads, ``add``
deduplicated by message id, saves, flushes); otherwise it raises
:class:`AgentRestartedError` and is never sent twice, as does the first
call of a handle whose unacknowledged changes were lost (a ``ReActAgent``'s
saves through :class:`RemoteSessions` included; a changing call that was
cancelled or interrupted before its answer counts as unacknowledged, as it
may have run: ``_acks``).  Each incarnation takes
the session over with a higher epoch, so an older one cut off from the
cluster cannot save over it; sessions carry their owner's namespace, and
no agent reads or writes another namespace's, nor a local runtime's session
it cannot tell is its own (``adopt_session=True`` takes one over: ``_host``).

**Events and idle agents.**  The handle's ``events``, ``stream`` and
``subscribe`` long-poll the actor's numbered event buffer (ordered, nothing
dropped while connected; a stream completes when its agent is stopped,
and at once when the agent is not running -- a subscription never creates
one --; one whose agent is lost ends with :class:`EventsLostError`:
``_events``).  ``idle_release=seconds`` saves and ends an agent's actor
after that long without a call (never while a subscriber is connected); the
next call re-creates it from its session, losing nothing.

The modules: ``_spec`` (identity, backend checks, errors), ``_calls`` (the
forwarded calls and their failover behaviour), ``_host`` (the actor),
``_events`` (the event buffer and the subscriber's pump), ``_wire`` (a call
and its answer pickled into one ``bytes`` each way), ``_handle`` (the
handle, its fleeting-memory mapping and the session storage a ``ReActAgent``
uses), ``_sandbox`` (not API: the loopback cluster in a private network
namespace that the cluster tests and benchmarks start).
"""

from __future__ import annotations

from actormem.cluster._calls import CALLS, NOT_FORWARDED
from actormem.cluster._events import EventsLostError
from actormem.cluster._handle import RemoteJournal, RemoteRuntime
from actormem.cluster._remote_state import RemoteFleeting, RemoteSessions
from actormem.cluster._spec import (
    RAY_NAMESPACE,
    AgentRestartedError,
    AgentSpec,
    ClusterConfigError,
    ClusterError,
    actor_name,
)
from actormem.logs import _configure_default

_configure_default()  # quiet logging unless the application configured structlog

__all__ = [
    "CALLS",
    "NOT_FORWARDED",
    "RAY_NAMESPACE",
    "AgentRestartedError",
    "AgentSpec",
    "ClusterConfigError",
    "ClusterError",
    "EventsLostError",
    "RemoteFleeting",
    "RemoteJournal",
    "RemoteRuntime",
    "RemoteSessions",
    "actor_name",
]
