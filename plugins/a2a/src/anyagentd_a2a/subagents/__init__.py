"""Subagents: agents that delegate to agents (:mod:`.manager`), and the MCP server that lets a driven agent do it
(:mod:`.mcp_server`)."""
