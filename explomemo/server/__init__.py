"""The MCP server: its tools and its stdio transport."""
