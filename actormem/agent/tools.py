"""Tools: plain Python functions that a model can call.

A :class:`Tool` wraps a function together with the JSON schema of its
arguments, derived from the type hints and the Google-style docstring::

    @tool
    def add(a: int, b: int = 1) -> int:
        \"\"\"Add two numbers.

        Args:
            a: the first number.
            b: the second number.
        \"\"\"
        return a + b

    add.spec()            # the OpenAI function-calling definition
    add.call({"a": 2})    # '3' (arguments validated, result as text)

Supported parameter types are the ones msgspec understands: ``str``,
``int``, ``float``, ``bool``, ``list[X]``, ``dict[str, X]``, ``Literal``,
``Enum``, ``X | None``, msgspec Structs, dataclasses, ``TypedDict`` and
``Annotated[X, msgspec.Meta(...)]`` (whose constraints are both advertised
and enforced).  Parameters with a default are not required.

A :class:`ToolRegistry` holds the tools of an agent and executes the
:class:`~actormem.messages.ToolUseBlock` calls of a model reply, turning any
failure into a ``tool_result`` with ``is_error=True`` that the model can read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import inspect
import re
import traceback
import typing
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, Final, TypeVar, overload

import msgspec
import structlog

from actormem.messages import Msg, ToolUseBlock

if typing.TYPE_CHECKING:
    from actormem.models.base import ToolSpec

__all__ = ["Tool", "ToolError", "ToolRegistry", "parse_docstring", "tool"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

#: Tool names accepted by OpenAI-compatible servers.
_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

_ARGS_HEADERS: Final = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
)
_SECTION_RE: Final = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_ARG_RE: Final = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class ToolError(Exception):
    """A tool cannot be defined, found or called with the given arguments."""


# -- docstrings ------------------------------------------------------------------


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Parse a Google-style docstring.

    Args:
        doc: the docstring (``None`` gives empty results).

    Returns:
        The first paragraph joined into one line, and the description of each
        parameter found in the ``Args:`` section (by parameter name).
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION_RE.match(line):
            break
        summary.append(line.strip())

    params: dict[str, str] = {}
    in_args = False
    arg_indent: int | None = None
    current: str | None = None
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        header = _SECTION_RE.match(line)
        if indent == 0:
            in_args = header is not None and header.group(1).lower() in _ARGS_HEADERS
            arg_indent, current = None, None
            continue
        if not in_args:
            continue
        if arg_indent is None:
            arg_indent = indent
        if indent == arg_indent:
            m = _ARG_RE.match(line.strip())
            current = m.group(1) if m else None
            if m and current is not None:
                params[current] = m.group(2).strip()
        elif indent > arg_indent and current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return " ".join(summary), params


# -- signatures ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Binder:
    """How to turn a JSON arguments object into a call of the function."""

    args_type: type[msgspec.Struct]
    fields: tuple[str, ...]
    positional_only: tuple[inspect.Parameter, ...]
    var_keyword: bool
    is_async: bool
    defaults: Mapping[str, Any]

    @classmethod
    def from_function(cls, fn: Callable[..., Any], tool_name: str) -> _Binder:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise ToolError(f"tool {tool_name!r}: cannot read the signature: {exc}") from None
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as exc:
            raise ToolError(
                f"tool {tool_name!r}: cannot resolve the type hints ({type(exc).__name__}: {exc})"
            ) from None
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        names: list[str] = []
        positional_only: list[inspect.Parameter] = []
        defaults: dict[str, Any] = {}
        var_keyword = False
        for p in sig.parameters.values():
            if p.kind is p.VAR_POSITIONAL:
                continue  # cannot be given by name: not part of the schema
            if p.kind is p.VAR_KEYWORD:
                var_keyword = True
                continue
            tp = hints.get(p.name, Any)
            if p.default is p.empty:
                fields.append((p.name, tp))
            else:
                fields.append((p.name, typing.Union[tp, msgspec.UnsetType], msgspec.UNSET))  # noqa: UP007
                defaults[p.name] = p.default
            names.append(p.name)
            if p.kind is p.POSITIONAL_ONLY:
                positional_only.append(p)
        args_type = msgspec.defstruct(
            f"{tool_name}_arguments",
            fields,
            kw_only=True,
            forbid_unknown_fields=not var_keyword,
        )
        return cls(
            args_type=args_type,
            fields=tuple(names),
            positional_only=tuple(positional_only),
            var_keyword=var_keyword,
            is_async=inspect.iscoroutinefunction(fn)
            or inspect.iscoroutinefunction(type(fn).__call__),
            defaults=defaults,
        )

    def bind(
        self, tool_name: str, arguments: Mapping[str, Any] | None
    ) -> tuple[list[Any], dict[str, Any]]:
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ToolError(
                f"invalid arguments for tool {tool_name!r}: expected a JSON object, "
                f"got {type(arguments).__name__}"
            )
        given = dict(arguments)
        extra: dict[str, Any] = {}
        if self.var_keyword:
            extra = {k: given.pop(k) for k in list(given) if k not in self.fields}
        try:
            obj = msgspec.convert(given, self.args_type, strict=False)
        except msgspec.ValidationError as exc:
            raise ToolError(f"invalid arguments for tool {tool_name!r}: {exc}") from None
        except (TypeError, ValueError) as exc:  # an unsupported annotation
            raise ToolError(f"tool {tool_name!r} cannot validate its arguments: {exc}") from None
        values = {
            name: value
            for name in self.fields
            if (value := getattr(obj, name)) is not msgspec.UNSET
        }
        positional = [
            values.pop(p.name) if p.name in values else p.default for p in self.positional_only
        ]
        return positional, {**values, **extra}


def _schema(binder: _Binder, tool_name: str, docs: Mapping[str, str]) -> dict[str, Any]:
    """The JSON schema of the arguments object, with every ``$ref`` inlined."""
    try:
        (ref,), components = msgspec.json.schema_components((binder.args_type,))
    except (TypeError, ValueError) as exc:
        raise ToolError(f"tool {tool_name!r}: unsupported parameter type: {exc}") from None
    schema: dict[str, Any] = _inline(ref, components, ())
    schema.pop("title", None)
    if binder.var_keyword:
        schema.pop("additionalProperties", None)
    props: dict[str, Any] = schema.setdefault("properties", {})
    for name, prop in props.items():
        if name in docs and docs[name] and "description" not in prop:
            prop["description"] = docs[name]
        if name in binder.defaults:
            default = binder.defaults[name]
            # A default that has no JSON form is simply not advertised.
            with contextlib.suppress(TypeError, msgspec.EncodeError):
                prop.setdefault("default", msgspec.to_builtins(default))
    if not schema.get("required"):
        schema.pop("required", None)
    return schema


def _inline(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    """Replace ``{"$ref": "#/$defs/X"}`` by a copy of X (recursive types stay refs)."""
    if isinstance(node, list):
        return [_inline(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref.removeprefix("#/$defs/")
        if key in seen or key not in defs:
            return {"type": "object"}  # a recursive type: accept any object at depth
        target = _inline(defs[key], defs, (*seen, key))
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    out = {k: _inline(v, defs, seen) for k, v in node.items()}
    enum = out.get("enum")
    if isinstance(enum, list) and "type" not in out:
        kinds = {_json_type(v) for v in enum}
        if len(kinds) == 1 and None not in kinds:
            out["type"] = kinds.pop()
    return out


def _json_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _to_text(value: Any) -> str:
    """A tool's return value as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return msgspec.json.encode(value, enc_hook=str).decode()
    except (TypeError, ValueError, msgspec.EncodeError):
        return str(value)


def _run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion from synchronous code, inside a loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Called synchronously from inside a running loop: run it on a private loop.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="actormem-tool") as pool:
        return pool.submit(asyncio.run, coro).result()


# -- Tool ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Tool:
    """A function that a model can call, with the JSON schema of its arguments.

    Build one with :func:`tool` or :meth:`Tool.from_function`; constructing it
    directly lets you give a hand-written ``parameters`` schema (arguments
    are still validated against the function's signature).  For a method,
    wrap the bound method (``Tool.from_function(obj.method)``) so that
    ``self`` is not a parameter.  Tools compare and hash by identity.

    Attributes:
        name: the name the model calls it by (``[A-Za-z0-9_-]{1,64}``).
        description: what it does, for the model.
        parameters: the JSON schema of the arguments object.
        fn: the function (sync or async), called with the arguments by keyword.
    """

    name: str
    description: str
    parameters: dict[str, Any] = dataclasses.field(repr=False)
    fn: Callable[..., Any] = dataclasses.field(repr=False)
    _binder: _Binder = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ToolError(
                f"invalid tool name {self.name!r}: use 1-64 letters, digits, '_' or '-'"
            )
        if not callable(self.fn):
            raise ToolError(
                f"tool {self.name!r}: fn must be callable, got {type(self.fn).__name__}"
            )
        object.__setattr__(self, "_binder", _Binder.from_function(self.fn, self.name))

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """Make a tool from a function's signature, type hints and docstring.

        Args:
            fn: the function (sync or async).
            name: the tool name; defaults to the function's ``__name__``.
            description: the tool description; defaults to the first paragraph
                of the docstring.

        Returns:
            The tool.

        Raises:
            ToolError: the name is invalid, or a parameter type has no JSON schema.
        """
        tool_name = name if name is not None else getattr(fn, "__name__", "")
        summary, docs = parse_docstring(inspect.getdoc(fn))
        if not isinstance(tool_name, str) or not _NAME_RE.match(tool_name):
            raise ToolError(
                f"invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' "
                "(pass name=... for lambdas and callables)"
            )
        binder = _Binder.from_function(fn, tool_name)
        return cls(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=_schema(binder, tool_name, docs),
            fn=fn,
        )

    def spec(self) -> ToolSpec:
        """The OpenAI function-calling definition of this tool.

        Returns:
            ``{"type": "function", "function": {"name", "description", "parameters"}}``.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def call(self, arguments: Mapping[str, Any] | None = None) -> str:
        """Validate the arguments, run the function and return its result as text.

        An async function is run to completion (on a private event loop when
        called from inside a running one; prefer :meth:`acall` there).

        Args:
            arguments: the arguments object sent by the model.

        Returns:
            The return value: a ``str`` as it is, anything else as JSON.

        Raises:
            ToolError: the arguments do not match the signature.
            Exception: whatever the function raises, unchanged.
        """
        args, kwargs = self._binder.bind(self.name, arguments)
        result = self.fn(*args, **kwargs)
        if inspect.isawaitable(result):
            result = _run_sync(_await(result))
        return _to_text(result)

    async def acall(self, arguments: Mapping[str, Any] | None = None) -> str:
        """Like :meth:`call`, without blocking the event loop.

        Sync functions run in a worker thread (``asyncio.to_thread``).

        Args:
            arguments: the arguments object sent by the model.

        Returns:
            The return value as text.

        Raises:
            ToolError: the arguments do not match the signature.
            Exception: whatever the function raises, unchanged.
        """
        args, kwargs = self._binder.bind(self.name, arguments)
        if self._binder.is_async:
            result = self.fn(*args, **kwargs)
        else:
            result = await asyncio.to_thread(self.fn, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return _to_text(result)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly (no validation)."""
        return self.fn(*args, **kwargs)


async def _await(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: turn a function into a :class:`Tool` (``@tool`` or ``@tool(name=...)``).

    Args:
        fn: the function, when used as ``@tool``.
        name: the tool name; defaults to the function's name.
        description: the description; defaults to the docstring's first paragraph.

    Returns:
        The tool, or a decorator that makes one.

    Raises:
        ToolError: see :meth:`Tool.from_function`.
    """
    if fn is not None:
        return Tool.from_function(fn, name=name, description=description)

    def decorate(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(f, name=name, description=description)

    return decorate


# -- registry -------------------------------------------------------------------------


class ToolRegistry:
    """The tools of an agent, by name; executes a model's tool calls.

    Args:
        tools: tools (or plain functions, wrapped with :meth:`Tool.from_function`).
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, tool: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Register a tool.

        Args:
            tool: a :class:`Tool` or a function to wrap.
            replace: replace a tool of the same name instead of failing.

        Returns:
            The registered tool.

        Raises:
            ToolError: a tool of that name is already registered (and not
                ``replace``), or the function cannot be made into a tool.
        """
        t = tool if isinstance(tool, Tool) else Tool.from_function(tool)
        if t.name in self._tools and not replace:
            raise ToolError(f"a tool named {t.name!r} is already registered")
        self._tools[t.name] = t
        return t

    def remove(self, name: str) -> None:
        """Unregister a tool (no error when absent).

        Args:
            name: the tool name.
        """
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool:
        """The tool called ``name``.

        Args:
            name: the tool name.

        Returns:
            The tool.

        Raises:
            ToolError: no such tool (the message lists the available ones).
        """
        try:
            return self._tools[name]
        except KeyError:
            available = ", ".join(sorted(self._tools)) or "none"
            raise ToolError(f"unknown tool {name!r} (available: {available})") from None

    def names(self) -> list[str]:
        """The registered tool names, in registration order."""
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """The OpenAI function-calling definitions of every tool, in registration order."""
        return [t.spec() for t in self._tools.values()]

    def execute(self, call: ToolUseBlock) -> Msg:
        """Run one tool call and return its ``tool_result`` message.

        Never raises for a tool failure: an unknown tool, bad arguments or an
        exception in the tool give a result with ``is_error=True`` whose text
        says what went wrong (for the model), and ``metadata["error"]`` with the
        exception type, message and a short traceback (for logs and memory).

        Args:
            call: the tool call from the model's reply.

        Returns:
            A ``role="tool"`` message paired with ``call.id``.
        """
        try:
            output = self.get(call.name).call(call.input)
        except Exception as exc:
            return self._error(call, exc)
        return Msg.tool_result(call.id, output, name=call.name)

    async def aexecute(self, call: ToolUseBlock) -> Msg:
        """Async :meth:`execute` (sync tools run in a worker thread).

        Args:
            call: the tool call from the model's reply.

        Returns:
            A ``role="tool"`` message paired with ``call.id``.
        """
        try:
            output = await self.get(call.name).acall(call.input)
        except Exception as exc:
            return self._error(call, exc)
        return Msg.tool_result(call.id, output, name=call.name)

    def execute_all(self, reply: Msg) -> list[Msg]:
        """Run every tool call of an assistant message, in order.

        Args:
            reply: the assistant message.

        Returns:
            One ``tool_result`` message per tool call.
        """
        return [self.execute(c) for c in reply.tool_uses]

    async def aexecute_all(self, reply: Msg) -> list[Msg]:
        """Async :meth:`execute_all` (the calls run one after the other).

        Args:
            reply: the assistant message.

        Returns:
            One ``tool_result`` message per tool call.
        """
        return [await self.aexecute(c) for c in reply.tool_uses]

    def _error(self, call: ToolUseBlock, exc: Exception) -> Msg:
        if isinstance(exc, ToolError):
            text = f"Error: {exc}"
        else:
            text = f"Error: tool {call.name!r} failed: {type(exc).__name__}: {exc}"
        log.warning(
            "tool_failed",
            tool=call.name,
            call_id=call.id,
            error_type=type(exc).__name__,
            argument_names=sorted(call.input) if isinstance(call.input, dict) else None,
        )
        error = {"type": type(exc).__name__, "message": str(exc)}
        if not isinstance(exc, ToolError):  # the model's mistake needs no traceback
            error["traceback"] = "".join(traceback.format_exception(exc, limit=-3))
        return Msg.tool_result(call.id, text, is_error=True, name=call.name, error=error)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r})"
