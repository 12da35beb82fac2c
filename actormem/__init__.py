"""actormem: a memory runtime for LLM agents."""
