"""What identifies a remote agent, and which backends a cluster may use.

Kept apart from the Ray code so the checks (a DuckDB path or a session
folder refused on a multi-node cluster, the actor's name, the options a
runtime may be built with) read, and are tested, on their own.  Nothing
here imports Ray at module level (the actor options are checked with Ray's
own validator when Ray is there, and options are pickled with its
cloudpickle).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from actormem._dsn import is_dsn
from actormem._runtime_args import check_user_scoped
from actormem.session import validate_session_id
from actormem.store import Namespace

__all__ = [
    "RAY_NAMESPACE",
    "AgentRestartedError",
    "AgentSpec",
    "ClusterConfigError",
    "ClusterError",
    "actor_name",
    "check_actor_options",
    "check_backends",
    "differing_settings",
    "make_spec",
]

#: The Ray namespace the agents' actors are named in (``ray.init(namespace=...)``
#: of the callers does not matter: the handle always looks the actor up here).
RAY_NAMESPACE: Final = "actormem"

#: MemoryRuntime options the handle sets itself, or that cannot cross processes.
_RESERVED: Final = {
    "namespace": "pass namespace= to RemoteRuntime.connect",
    "store": "pass store= to RemoteRuntime.connect",
    "sessions": "pass sessions= to RemoteRuntime.connect",
    "ui": "the memory explorer is not served from a cluster actor (run `actormem ui` on the store)",
}

#: Ray actor options the handle sets itself: the agent's identity (name,
#: namespace), its lifetime, and who decides what is sent again.
_OWN_ACTOR_OPTIONS: Final = {
    "name": "the actor is named for the agent's namespace and session id",
    "namespace": "agents' actors live in the Ray namespace 'actormem'",
    "lifetime": "an agent's actor is detached: it outlives the caller that made it",
    "get_if_exists": "connect always gets the agent's actor, or creates it",
    "max_restarts": "pass max_restarts= to RemoteRuntime.connect",
    "max_task_retries": "the handle decides which calls are sent again after a failover",
    "max_concurrency": "an agent's calls run one at a time, in order (an idle release "
    "runs between calls)",
    "concurrency_groups": "the actor's event polls have their own group; its calls run one "
    "at a time",
    "max_pending_calls": "a handle's event polls are pending calls too: a bound on them "
    "makes its calls fail with Ray's PendingCallsLimitExceeded",
}


class ClusterError(RuntimeError):
    """A remote agent cannot be reached or created (the message says why)."""


class ClusterConfigError(ClusterError, ValueError):
    """The agent's settings cannot work on this cluster (the message names the problem)."""


class AgentRestartedError(ClusterError):
    """The agent's actor restarted (its node died, or it was released) since this
    handle's last acknowledged call.

    The restarted agent holds its last acknowledged state (the last returned
    ``flush()`` or ``save_session()``, or every returned call with
    ``write_through=True``); what this handle did after that may be lost, and
    the call that raised this may or may not have taken effect.  The handle
    is usable again at once: continue from :meth:`RemoteRuntime.messages`.

    Attributes:
        call: the call that raised it.
    """

    def __init__(self, message: str, call: str = "") -> None:
        super().__init__(message)
        self.call = call

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.call))


class AgentSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the hosting actor needs to build (and rebuild) one agent's runtime.

    Attributes:
        namespace: whose memories these are.
        session_id: the session the actor restores from and saves to.
        store: the long-term store: a ``postgresql://`` URL (or a DuckDB path
            on a one-node cluster), or None for no long-term memory.
        sessions: where sessions live: a ``postgresql://`` URL (or a folder on
            a one-node cluster; None means the runtime's default folder).
        write_through: save the session after every call that changes the
            short-term memory, and flush after every ``record``, before it
            returns (every returned call is then acknowledged).
        idle_release: seconds without a call after which the actor saves
            everything (flush + session) and exits, freeing its node's memory;
            the next call of any handle creates it again from the session.
            None: it stays until ``stop()``.
        options: the other ``MemoryRuntime`` keyword arguments.
        max_restarts: Ray restarts of the actor (-1: no limit); a setting of
            the agent (a second connect must ask for the same).
        adopt_session: the caller's explicit permission to take over the
            agent's own session when it was written outside the cluster and
            does not record whose it is (a local ``MemoryRuntime`` without
            long-term memory, or one saved before runtimes recorded their
            namespace).  Not a setting: it only matters when the actor starts.
    """

    namespace: Namespace
    session_id: str
    store: str | None = None
    sessions: str | None = None
    write_through: bool = False
    idle_release: float | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    max_restarts: int = -1
    adopt_session: bool = False

    def identity(self) -> tuple[tuple[str, str, str, str], str]:
        """What two callers must agree on to share the actor."""
        return (self.namespace.key(), self.session_id)


def _check_sendable(name: str, value: Any) -> None:
    """Refuse an option that cannot travel to the actor's process, naming it.

    Ray would fail later with its own error, which prints the whole spec --
    the store's DSN and its password included -- and names no option.
    Pickled as Ray does (its cloudpickle; the standard pickle without Ray).
    """
    dumps: Callable[[Any], bytes] = pickle.dumps
    with contextlib.suppress(ImportError):  # the cluster package runs with Ray
        from ray import cloudpickle

        dumps = cloudpickle.dumps
    try:
        dumps(value)
    except Exception as exc:
        why = (str(exc).splitlines() or [""])[0][:200]
        raise ClusterConfigError(
            f"RemoteRuntime.connect({name}=...) cannot be sent to the agent's actor: a "
            f"{type(value).__name__} does not pickle ({type(exc).__name__}: {why}); pass an "
            "object that pickles (no open locks, sockets or clients), made again in the actor"
        ) from None


def make_spec(
    session_id: str,
    namespace: Namespace | None,
    store: str | os.PathLike[str] | None,
    sessions: str | os.PathLike[str] | None,
    write_through: bool,
    options: dict[str, Any],
    idle_release: float | None = None,
    *,
    max_restarts: int = -1,
    adopt_session: bool = False,
) -> AgentSpec:
    """Check the arguments of ``RemoteRuntime.connect`` where they enter.

    Raises:
        ClusterConfigError: a reserved option, a store or session storage
            given as an object (it cannot move to another process), or a
            ``max_restarts``/``adopt_session`` of the wrong type or range.
        SessionError: a bad session id.
    """
    sid = validate_session_id(session_id)
    if (
        not isinstance(max_restarts, int)
        or isinstance(max_restarts, bool)
        or not -1 <= max_restarts <= 1_000_000
    ):
        raise ClusterConfigError(
            "RemoteRuntime.connect(max_restarts=...) must be -1 (no limit) or a number of "
            f"restarts from 0, got {max_restarts!r}"
        )
    if not isinstance(adopt_session, bool):
        raise ClusterConfigError(
            f"RemoteRuntime.connect(adopt_session=...) must be a bool, got {adopt_session!r}"
        )
    for name, why in _RESERVED.items():
        if name in options:
            raise ClusterConfigError(f"RemoteRuntime.connect: {name}= is not an option here: {why}")
    if not isinstance(write_through, bool):
        raise ClusterConfigError(
            f"RemoteRuntime.connect(write_through=...) must be a bool, got {write_through!r}"
        )
    if idle_release is not None and (
        not isinstance(idle_release, int | float)
        or isinstance(idle_release, bool)
        or not 0 < idle_release <= 7 * 86_400
    ):
        raise ClusterConfigError(
            "RemoteRuntime.connect(idle_release=...) must be None or seconds from 0 to a week, "
            f"got {idle_release!r}"
        )
    for what, value in (("store", store), ("sessions", sessions)):
        if value is not None and not isinstance(value, str | os.PathLike):
            raise ClusterConfigError(
                f"RemoteRuntime.connect({what}=...) must be a postgresql:// URL or a path: "
                f"a {type(value).__name__} object cannot move to the actor's process"
            )
    for name, value in options.items():
        _check_sendable(name, value)
    ns = namespace if namespace is not None else Namespace(user_id="default", agent_id="agent")
    if not isinstance(ns, Namespace):
        raise ClusterConfigError(
            f"RemoteRuntime.connect(namespace=...) must be a Namespace, got {type(ns).__name__}"
        )
    try:
        check_user_scoped(ns, "RemoteRuntime.connect(namespace=...)")
    except ValueError as exc:
        raise ClusterConfigError(str(exc)) from None
    return AgentSpec(
        namespace=ns,
        session_id=sid,
        store=None if store is None else os.fspath(store),
        sessions=None if sessions is None else os.fspath(sessions),
        write_through=write_through,
        idle_release=None if idle_release is None else float(idle_release),
        options=dict(options),
        max_restarts=max_restarts,
        adopt_session=adopt_session,
    )


def check_actor_options(actor_options: object) -> dict[str, Any]:
    """Check ``RemoteRuntime.connect(actor_options=...)``: Ray's ``.options()`` the handle
    does not set itself.

    Raises:
        ClusterConfigError: not a mapping with string keys, an option the
            handle sets (the message names it and says why), or a value Ray
            refuses (a negative ``num_cpus``...: named with Ray's reason).
    """
    if actor_options is None:
        return {}
    if not isinstance(actor_options, dict | Mapping) or not all(
        isinstance(k, str) for k in actor_options
    ):
        raise ClusterConfigError(
            "RemoteRuntime.connect(actor_options=...) must be a mapping of Ray actor options, "
            f"got {type(actor_options).__name__}"
        )
    own = [k for k in actor_options if k in _OWN_ACTOR_OPTIONS]
    if own:
        why = "; ".join(f"{k}: {_OWN_ACTOR_OPTIONS[k]}" for k in own)
        raise ClusterConfigError(
            f"RemoteRuntime.connect(actor_options=...) may not set {', '.join(own)} ({why})"
        )
    for name, value in actor_options.items():
        _check_ray_option(name, value)
    return dict(actor_options)


def _check_ray_option(name: str, value: Any) -> None:
    """Ray's own check of one actor option, its refusal raised naming the option.

    Ray refuses a bad value (``num_cpus=-1``, ``resources={"CPU": 1}``, an
    unknown keyword) only when the actor is made, in an error that names
    neither the call nor, for some, the option.  Without Ray (or a Ray
    without this check) nothing is checked here: Ray still refuses it later.
    """
    try:
        from ray._common.ray_option_utils import validate_actor_options
    except ImportError:  # pragma: no cover - the cluster package runs with Ray 2.60
        return
    try:
        validate_actor_options({name: value}, in_options=True)
    except (ValueError, TypeError) as exc:
        why = (str(exc).splitlines() or [""])[0][:300]
        raise ClusterConfigError(
            f"RemoteRuntime.connect(actor_options=...): {name}={value!r} is refused by Ray ({why})"
        ) from None


def _same(a: object, b: object, depth: int = 0) -> bool:
    """Whether two option values define the same agent (equal, or equal in every attribute)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        equal = a == b
        if isinstance(equal, bool) and equal:
            return True
        if not isinstance(equal, bool) and hasattr(equal, "all"):  # an array's elementwise ==
            return bool(equal.all())
    except Exception:  # an __eq__ that refuses: compare the attributes
        pass
    if depth > 4:
        return False
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        return len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_same(a[k], b[k], depth + 1) for k in a)
    fields_a, fields_b = _fields(a), _fields(b)
    if fields_a is None or fields_b is None:
        return False
    return _same(fields_a, fields_b, depth + 1)


def _fields(obj: object) -> dict[str, Any] | None:
    """An object's state (its ``__dict__`` and slots), or None when it has none to compare."""
    state: dict[str, Any] = {}
    if hasattr(obj, "__dict__"):
        state.update(vars(obj))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot) and slot != "__weakref__":
                state[slot] = getattr(obj, slot)
    if not state and not hasattr(obj, "__dict__"):
        return None
    return state


_MISSING: Final = object()


def differing_settings(asked: AgentSpec, running: AgentSpec) -> list[str]:
    """The settings of ``asked`` that are not those the running agent was created with.

    Every setting that defines the agent: the store, the session storage,
    ``write_through``, ``idle_release``, ``max_restarts`` and each
    ``MemoryRuntime`` option (``embedder``, ``recorder``, ``autocontext``,
    ``model``...; objects compare by type and state, so two
    ``HashEmbedder(64)`` are the same).  Not ``adopt_session`` (a permission
    used when the actor starts) nor a handle's own ``failover_timeout``.
    """
    differ = [
        name
        for name in ("store", "sessions", "write_through", "idle_release", "max_restarts")
        if getattr(asked, name) != getattr(running, name)
    ]
    for name in sorted(set(asked.options) | set(running.options)):
        if (
            name not in asked.options
            or name not in running.options
            or not _same(asked.options[name], running.options[name])
        ):
            differ.append(name)
    return differ


def check_backends(spec: AgentSpec, nodes: int) -> None:
    """Refuse settings that keep an agent's state on one node's disk when there are several.

    An agent's actor restarts on another node when its node dies, and any
    caller may create it on any node: a DuckDB file, a JSON session folder
    or journal files are on one node only, so the restarted agent would
    start from nothing (or from a stale copy).

    Raises:
        ClusterConfigError: ``nodes`` > 1 and the store, the sessions or the
            journal live on a node's disk.
    """
    if nodes <= 1:
        return
    local: list[str] = []
    if spec.store is not None and not is_dsn(spec.store):
        local.append(f"the store {spec.store!r} is a local DuckDB file")
    if spec.store is None and spec.options.get("long_term") is not None:
        local.append("long_term= without store= opens a local DuckDB file")
    if spec.sessions is None or not is_dsn(spec.sessions):
        where = "the default folder" if spec.sessions is None else repr(spec.sessions)
        local.append(f"the sessions are JSON files in {where}")
    if spec.options.get("journal"):
        local.append("the journal keeps its files on the node's disk")
    if local:
        raise ClusterConfigError(
            f"this Ray cluster has {nodes} nodes, and an agent restarted on another node "
            f"would not find its state: {'; '.join(local)}. PostgreSQL is the backend for a "
            "cluster: pass store='postgresql://...' and sessions='postgresql://...' "
            "(a DuckDB path and a session folder work on a one-node cluster only)"
        )


def actor_name(spec: AgentSpec) -> str:
    """The Ray actor name of an agent: one per (namespace, session id).

    A digest, so any namespace and session id make a valid, fixed-length
    name; the actor checks the full identity on every connect.
    """
    digest = hashlib.sha256(repr(spec.identity()).encode()).hexdigest()[:40]
    return f"actormem-agent-{digest}"
