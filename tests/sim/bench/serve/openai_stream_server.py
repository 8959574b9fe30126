"""A local OpenAI-compatible chat server that streams (SSE) the way vLLM's server does, for the
fast tests of `bench serve`: real HTTP, real chunked streams, strict about the model id.

- GET  /v1/models             {"object": "list", "data": [{"id": <model>, ...}]}
- POST /v1/chat/completions   stream=false: one chat.completion; stream=true: a first chunk with the role and the first token, one
  chunk per further token (the last with finish_reason), then the usage chunk when
  stream_options.include_usage, then `data: [DONE]`. An unknown model is a 404 as vLLM answers
  it; a prompt containing FAIL is an HTTP 500.
Time to first token = ttft_s + ttft_per_char_s x prompt characters (a prefill that grows with
the history), then itl_s between tokens: timings known in advance (the cross-check with vLLM's client
measures both clients against them). Every request's headers and body are kept in `requests`.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def text(content) -> str:
    """A message's text: a string, or OpenAI's list of parts (vLLM's client sends [{"type": "text", ...}])."""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


class StreamServer:
    def __init__(self, model: str = "tiny", ttft_s: float = 0.01, ttft_per_char_s: float = 0.0, itl_s: float = 0.002,
                 prompt_tokens=None):
        self.model, self.ttft_s, self.ttft_per_char_s, self.itl_s = model, ttft_s, ttft_per_char_s, itl_s
        # messages -> the prompt's token count in usage (default: 4 characters a token)
        self.prompt_tokens = prompt_tokens or (lambda messages: len("".join(m["content"] for m in messages)) // 4 + 1)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _json(self, code: int, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": server.model, "object": "model", "root": server.model}]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    server.requests.append({"headers": dict(self.headers), "body": body})
                if self.path != "/v1/chat/completions":
                    return self._json(404, {"error": {"message": "not found"}})
                if body.get("model") != server.model:
                    return self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                                                      "type": "NotFoundError", "code": 404}})
                messages = [{**m, "content": text(m["content"])} for m in body["messages"]]
                prompt = "".join(m["content"] for m in messages)
                if "FAIL" in prompt:
                    return self._json(500, {"error": {"message": "injected failure"}})
                n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
                pt = server.prompt_tokens(messages)
                usage = {"prompt_tokens": pt, "completion_tokens": n, "total_tokens": pt + n}
                if not body.get("stream"):
                    time.sleep(server.ttft_s + server.ttft_per_char_s * len(prompt) + server.itl_s * (n - 1))
                    return self._json(200, {"id": "chatcmpl-1", "object": "chat.completion", "model": server.model,
                                            "choices": [{"index": 0, "finish_reason": "length",
                                                         "message": {"role": "assistant", "content": "tok " * n}}],
                                            "usage": usage})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def send(obj) -> None:
                    data = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()

                time.sleep(server.ttft_s + server.ttft_per_char_s * len(prompt))
                base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": server.model}
                for i in range(n):
                    if i:
                        time.sleep(server.itl_s)
                    delta = {"role": "assistant", "content": "tok "} if i == 0 else {"content": "tok "}
                    send({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": "length" if i == n - 1 else None}]})
                if (body.get("stream_options") or {}).get("include_usage"):
                    send({**base, "choices": [], "usage": usage})
                send("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # many clients connect at once (the default 5 drops SYNs: 1 s retries)

            def handle_error(self, request, client_address):  # a client closing a keep-alive socket
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "StreamServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

