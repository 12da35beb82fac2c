"""Reaching an agent's actor: Ray's get-or-create, the first answer, and Ray's errors.

Kept apart from :mod:`actormem.cluster._handle` (what a handle does with the
actor once it has it: calls, failover, sessions) because this is how a handle
finds the actor at all -- the actor's Ray options, an actor that ends between
the lookup and its first answer (:func:`_reach`), and the error a failed start
is raised as (:func:`creation_error`).  ``_handle`` calls :func:`_get_or_create`
through this module, so a test can stand in for Ray's actor handle in one place.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Mapping
from typing import Any

import structlog

from actormem.cluster._capacity import wait_started
from actormem.cluster._events import GROUP
from actormem.cluster._host import MemoryHost
from actormem.cluster._spec import (
    RAY_NAMESPACE,
    AgentSpec,
    ClusterConfigError,
    ClusterError,
    actor_name,
)

__all__ = ["creation_error"]

log = structlog.get_logger(__name__)

#: Longest pause between two attempts to reach a restarting actor.
_MAX_BACKOFF = 0.5


def _ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - the extra is installed by make test
        raise ImportError("actormem.cluster needs Ray: pip install 'actormem[ray]'") from None
    return ray


@functools.cache
def _host_class() -> Any:
    # The agent's calls run one at a time; event polls wait in a group of their own.
    return _ray().remote(concurrency_groups={GROUP: 16})(MemoryHost)


def ray_worker_connected() -> bool:
    """Whether this process is connected to Ray, asked without starting one: ``ray.get``
    and ``ray.get_runtime_context`` start a local Ray, bound to the host's external
    interface, in a process that is not connected (a handle used after
    ``ray.shutdown()``; a test's event pump outliving its stand-in for Ray)."""
    from ray._private import worker

    return bool(worker.global_worker.connected)


def _lost_errors() -> tuple[type[BaseException], ...]:
    exc = _ray().exceptions
    return (exc.RayActorError, exc.ActorUnavailableError)


def _unwrapped(exc: BaseException) -> BaseException:
    """The runtime's own exception inside Ray's task error (or ``exc`` itself)."""
    cause = getattr(exc, "cause", None)
    if isinstance(exc, _ray().exceptions.RayTaskError) and isinstance(cause, BaseException):
        return cause
    return exc


def _get_or_create(spec: AgentSpec, connect: Mapping[str, Any]) -> Any:
    options: dict[str, Any] = {
        "name": actor_name(spec),
        "namespace": RAY_NAMESPACE,
        "lifetime": "detached",
        "get_if_exists": True,
        "max_restarts": connect["max_restarts"],
        "max_task_retries": 0,  # the handle decides what may be sent again
        "num_cpus": 0,
    }
    options.update(connect["actor_options"])
    return _host_class().options(**options).remote(spec)


#: Times ``connect`` gets (or creates) the agent's actor again when the one it got ended
#: before answering (an idle release or a stop between the lookup and the first call).
_CONNECT_TRIES = 5


def _reach(
    spec: AgentSpec, connect: Mapping[str, Any], start_timeout: float
) -> tuple[Any, dict[str, Any]]:
    """Get or create the agent's actor and describe it: ``(actor, its description)``.

    Ray's get-or-create can hand back an actor that is ending -- released
    idle, or stopped by another handle, between the lookup and the
    ``describe`` -- which then fails without having run.  That actor is
    looked up (or created) again, up to ``_CONNECT_TRIES`` times; an actor
    whose start failed (its ``__init__`` raised) is not: that error is
    raised at once (:func:`creation_error`, Ray's error as the cause).  An
    actor that waits for a node with room is waited for up to
    ``start_timeout`` (``_capacity.wait_started``).

    Raises:
        ClusterConfigError, ClusterError: as :meth:`RemoteRuntime.connect`.
    """
    ray = _ray()
    last: BaseException | None = None
    deadline = time.monotonic() + start_timeout
    what = f"could not start within start_timeout={start_timeout:g}s"
    for attempt in range(_CONNECT_TRIES):
        actor = _get_or_create(spec, connect)
        try:
            ref = actor.describe.remote(spec)
            wait_started(ref, actor, spec, connect["actor_options"], deadline, what)
            info: dict[str, Any] = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            raise _unwrapped(exc) from None
        except ray.exceptions.RayActorError as exc:
            if exc.actor_init_failed:
                raise creation_error(spec, exc) from exc
            last = exc
            log.info(
                "cluster.connect_found_an_ending_actor",
                session_id=spec.session_id,
                attempt=attempt + 1,
                error=type(exc).__name__,
            )
            time.sleep(min(0.05 * 2**attempt, _MAX_BACKOFF))  # Ray gives no event for "gone"
            continue
        return actor, info
    raise ClusterError(
        f"the agent {spec.session_id!r} ended before answering {_CONNECT_TRIES} times in a "
        f"row while connecting (released, stopped or restarting each time): {last}"
    ) from last


#: The runtime's errors a failed actor start is raised as (by the name Ray's message gives).
_AS_CONFIG_ERROR = ("ClusterConfigError", "ValueError", "TypeError")


def creation_error(spec: AgentSpec, exc: BaseException) -> ClusterError:
    """The error to raise when the agent's actor could not start (``exc``: Ray's, the cause).

    Ray keeps only the text of an error raised in an actor's ``__init__``
    (the traceback; its last ``Name: message`` line is the error): a
    refusal of the agent's settings (:class:`ClusterConfigError`, or the
    runtime's ``ValueError``/``TypeError`` on its
    arguments) is raised as :class:`ClusterConfigError`, anything else as
    :class:`ClusterError`; the caller chains Ray's error as the cause.
    """
    text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = [m for m in map(_ERROR_LINE.match, lines) if m is not None]
    if found:
        name, message = found[-1].group(1), found[-1].group(2)
        what = f"{name}: {message}"
    else:
        name, what = "", (lines[-1] if lines else repr(exc))
    kind = ClusterConfigError if name in _AS_CONFIG_ERROR else ClusterError
    return kind(f"the agent {spec.session_id!r} could not start: {what}")


_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception)): (.*)$")
