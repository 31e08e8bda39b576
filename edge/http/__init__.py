"""The edge's HTTP surface: OpenAI endpoints, admin and ops endpoints, middleware, OpenAPI.

Handlers admit a request (``intake``) and hand it to the pipeline; they hold no state.
"""
