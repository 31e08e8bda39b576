"""Code both the edge and the core use: OpenAI schemas, errors, SSE, processes, paths."""
