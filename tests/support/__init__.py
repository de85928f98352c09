"""
The helpers the test modules share, one home each.

- `support.events`: what a run emitted, in the shapes tests compare (`types_of`, `said`, `body`);
- `support.sse`: reading SSE bodies (`events_of`, `frames_of`) and the one-terminal rule;
- `support.servers`: a real uvicorn in the test's event loop (`serving`), the e2e marks;
- `support.node`: the official ``@ag-ui/client`` under Node, as a verifier and a client;
- `support.redis_server`: a redis-server of the tests' own, on a free port;
- `support.strategies`: Hypothesis strategies for every object of the AG-UI model;
- `support.programs`: random agent programs for the byte-path properties;
- `support.kinds`: the four kinds of callable that ``@subagent`` and ``@step`` wrap;
- `support.adapters`: what the adapter scenarios share (client verdicts, owners).
"""
