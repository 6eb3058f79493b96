"""Serve a graph as a SPARQL 1.1 endpoint over HTTP (the protocol's query operation, GET or POST,
results as SPARQL JSON), on a pyoxigraph store: a real endpoint for the remote path's tests and
benchmark, and for users who want one process to hold the graph and others to decode against it
(``structgen kg serve graph.ttl``)."""
from __future__ import annotations

import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["serve_graph", "EndpointServer"]


class EndpointServer:
    """A running endpoint: ``url``, and ``close()`` (also as a context manager)."""

    def __init__(self, httpd: ThreadingHTTPServer, thread: threading.Thread):
        self.httpd, self.thread = httpd, thread
        host, port = httpd.server_address[:2]
        self.url = f"http://{host}:{port}/sparql"
        self.served = 0

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def __enter__(self) -> "EndpointServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def serve_graph(store: Any, host: str = "127.0.0.1", port: int = 0, *, block: bool = False) -> EndpointServer:
    """Serve ``store`` (a pyoxigraph Store, or a KnowledgeGraph's) at ``http://host:port/sparql``;
    port 0 picks a free one.  ``block`` serves in this thread until interrupted."""
    import pyoxigraph

    store = getattr(store, "store", store)
    holder: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet: a benchmark sends thousands of queries
            pass

        def _answer(self, query: str | None) -> None:
            if not query:
                return self._fail(400, "no query parameter")
            try:
                res = store.query(query)
            except (SyntaxError, ValueError, OSError) as e:
                return self._fail(400, str(e))
            if type(res).__name__ == "QueryBoolean":
                body = ('{"head": {}, "boolean": %s}' % ("true" if bool(res) else "false")).encode()
            else:
                body = res.serialize(format=pyoxigraph.QueryResultsFormat.JSON)
            holder["server"].served += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/sparql-results+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _fail(self, code: int, message: str) -> None:
            body = message.encode("utf-8", "replace")
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            qs = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            self._answer((qs.get("query") or [None])[0])

        def do_POST(self) -> None:  # noqa: N802
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n).decode("utf-8")
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if kind == "application/sparql-query":
                return self._answer(raw)
            self._answer((urllib.parse.parse_qs(raw).get("query") or [None])[0])

    httpd = ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    server = holder["server"] = EndpointServer(httpd, thread)
    if block:
        print(f"serving {server.url}", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        return server
    thread.start()
    return server
