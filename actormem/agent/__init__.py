"""The ReAct agent that embeds the memory actors, and the tools it can call."""
