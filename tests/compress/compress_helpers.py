"""Helpers shared by the compressor tests: small conversation builders."""

from __future__ import annotations

from actormem.messages import Msg


def tool_pair(name: str, output: str, *, call_id: str, **args: object) -> list[Msg]:
    """An assistant tool call and its result."""
    call = Msg.tool_call(name, dict(args), call_id=call_id)
    return [call, Msg.tool_result(call_id, output, name=name)]


def conversation(rounds: int, *, tools_per_round: int = 0, big: int = 0) -> list[Msg]:
    """A system prompt, then ``rounds`` of user question, tool calls and answer."""
    msgs = [Msg.system("You are a careful assistant.")]
    for r in range(rounds):
        msgs.append(Msg.user(f"Round {r}: please check ticket T-{100 + r} for Dana Smith."))
        for k in range(tools_per_round):
            out = "x" * big if big else f"ticket T-{100 + r} status open, step {k}"
            msgs += tool_pair("lookup", out, call_id=f"c{r}_{k}", ticket=f"T-{100 + r}")
        msgs.append(
            Msg.assistant(f"Ticket T-{100 + r} is open; Dana Smith owns it since May {r % 28 + 1}.")
        )
    return msgs
