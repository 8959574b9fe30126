"""Local stand-ins for the providers' batch APIs, as strict as the real ones where esc-eval touches them
(each request of a batch is answered by the online stand-in's rules: tests/serve/api_standins.py).

BatchOpenAI      OpenAI's Files and Batch APIs: POST /v1/files (multipart, purpose `batch`), GET
                 /v1/files (list), GET /v1/files/{id}/content; POST /v1/batches (input_file_id,
                 endpoint, completion_window "24h", metadata of at most 16 string pairs; nothing else),
                 GET /v1/batches/{id}, GET /v1/batches (newest first, `after`, `limit`), POST
                 /v1/batches/{id}/cancel. A batch is validated as OpenAI does (JSONL lines with a unique
                 custom_id, method POST, the batch's url, one model; at most `max_requests` lines and
                 `max_bytes` bytes): a bad file fails the batch with its errors. Output and error files
                 in OpenAI's line shapes, lines in another order than the input's; expired and cancelled
                 requests in the error file (batch_expired, batch_cancelled).
BatchAnthropic   (batch_standins_anthropic.py) Anthropic's Message Batches: POST /v1/messages/batches (requests of custom_id
                 ^[a-zA-Z0-9_-]{1,64}$, unique, and params; at most `max_requests` and `max_bytes`),
                 GET /v1/messages/batches/{id}, GET /v1/messages/batches (newest first), POST .../cancel,
                 GET .../results (JSONL, only once ended, in another order): succeeded, errored, canceled,
                 expired.

Both: a batch moves one step each time it is retrieved (validating, in progress for `polls` retrievals,
then ended), so a test sets how long a batch takes in polls; `expire_next` batches expire after
`expire_keep` requests; the first `fail_lines` requests executed fail with a server error; the
`hold_create_at`-th create registers its batch and then waits `create_delay_s` before it answers (a
client killed meanwhile never hears of a batch that exists). `created` lists every batch made; `executed` counts request
bodies run, so a test tells a repeated request.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

from aiohttp import web

from api_standins import StrictOpenAI

OPENAI_ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses")


class _Lifecycle:
    """The knobs and counters both stand-ins share (see the module docstring)."""

    def batch_setup(self, *, max_requests: int, max_bytes: int, polls: int = 1, expire_next: int = 0,
                    expire_keep: int = 0, fail_lines: int = 0, create_delay_s: float = 0.0,
                    hold_create_at: int = 1) -> None:
        self.max_requests, self.max_bytes, self.polls = max_requests, max_bytes, polls
        self.client_max_size = max_bytes + 2**20  # a body over the limit is refused by the API's rule, not aiohttp's
        self.expire_next, self.expire_keep, self.fail_lines = expire_next, expire_keep, fail_lines
        self.create_delay_s, self.hold_create_at = create_delay_s, hold_create_at
        self._waking: list[asyncio.Event] = []  # creates held back, let go when the stand-in stops
        self.batches: dict[str, dict] = {}
        self.created: list[str] = []  # every batch id made, in order
        self.executed: Counter[str] = Counter()  # request body -> times run inside a batch
        self.create_seen = 0  # create requests received (before any delay)

    def run_lines(self, batch: dict, requests: list[tuple[str, dict]], keep: int | None, why: str) -> list[tuple]:
        """(custom_id, status, payload | None, reason) per request: the first `keep` run (None: all), the rest
        left with `why` (expired, cancelled)."""
        out = []
        for i, (cid, body) in enumerate(requests):
            if keep is not None and i >= keep:
                out.append((cid, None, None, why))
                continue
            self.executed[json.dumps(body, sort_keys=True)] += 1
            if self.fail_lines > 0:
                self.fail_lines -= 1
                out.append((cid, 500, None, "server_error"))
                continue
            resp = self.respond(body, limited=False)
            out.append((cid, resp.status, json.loads(resp.text), None))
        return out[::-1]  # neither API keeps the input's order

    def repeated_lines(self) -> int:
        return sum(n - 1 for n in self.executed.values())

    async def hold_create(self) -> None:
        """The batch exists now, whether or not the client hears of it: the `hold_create_at`-th create
        waits `create_delay_s` (less if the stand-in stops meanwhile) before it answers."""
        if self.create_delay_s and self.create_seen == self.hold_create_at:
            wake = asyncio.Event()
            self._waking.append(wake)
            try:
                await asyncio.wait_for(wake.wait(), self.create_delay_s)
            except asyncio.TimeoutError:
                pass

    def stop(self) -> None:
        if self.loop is not None:
            for wake in self._waking:
                self.loop.call_soon_threadsafe(wake.set)
        super().stop()


def _now() -> int:
    return int(time.time())


class BatchOpenAI(_Lifecycle, StrictOpenAI):
    """See the module docstring."""

    def __init__(self, *, key: str | None = "sk-local", max_requests: int = 50_000, max_bytes: int = 200 * 2**20,
                 **lifecycle):
        super().__init__(key=key)
        self.batch_setup(max_requests=max_requests, max_bytes=max_bytes, **lifecycle)
        self.files: dict[str, dict] = {}

    def routes(self, app: web.Application) -> None:
        super().routes(app)
        app.router.add_post("/v1/files", self.upload)
        app.router.add_get("/v1/files", self.list_files)
        app.router.add_get("/v1/files/{id}/content", self.content)
        app.router.add_post("/v1/batches", self.create)
        app.router.add_get("/v1/batches", self.list_batches)
        app.router.add_get("/v1/batches/{id}", self.retrieve)
        app.router.add_post("/v1/batches/{id}/cancel", self.cancel_route)

    def auth(self, request: web.Request) -> web.Response | None:
        if self.key and request.headers.get("Authorization") != f"Bearer {self.key}":
            return self.error(401, "Incorrect API key provided.")
        return None

    def _file(self, data: bytes, filename: str, purpose: str) -> dict:
        fid = f"file-{len(self.files) + 1:06d}"
        self.files[fid] = {"id": fid, "object": "file", "bytes": len(data), "created_at": _now(), "filename": filename,
                           "purpose": purpose, "status": "processed", "data": data}
        return self.files[fid]

    @staticmethod
    def _public(f: dict) -> dict:
        return {k: v for k, v in f.items() if k != "data"}

    async def upload(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        form = await request.post()
        purpose, upload = form.get("purpose"), form.get("file")
        if purpose not in ("assistants", "batch", "fine-tune", "vision", "user_data", "evals"):
            return self.error(400, f"'{purpose}' is not one of ['assistants', 'batch', 'fine-tune', 'vision', "
                                   "'user_data', 'evals'] - 'purpose'", param="purpose")
        if upload is None or not hasattr(upload, "file"):
            return self.error(400, "'file' is a required property", param="file")
        if purpose == "batch" and not upload.filename.endswith(".jsonl"):
            return self.error(400, "Invalid file format for Batch API. Must be .jsonl", param="file")
        return web.json_response(self._public(self._file(upload.file.read(), upload.filename, purpose)))

    async def list_files(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        purpose = request.query.get("purpose")
        data = [self._public(f) for f in reversed(self.files.values()) if purpose in (None, f["purpose"])]
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def content(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        f = self.files.get(request.match_info["id"])
        if f is None:
            return self.error(404, f"No such File object: {request.match_info['id']}", param="id")
        return web.Response(body=f["data"], content_type="application/octet-stream")

    async def create(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        self.create_seen += 1
        body = await request.json()
        unknown = sorted(set(body) - {"input_file_id", "endpoint", "completion_window", "metadata",
                                      "output_expires_after"})
        if unknown:
            return self.error(400, f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
        if body.get("endpoint") not in OPENAI_ENDPOINTS:
            return self.error(400, f"Invalid value for 'endpoint': {body.get('endpoint')!r}", param="endpoint")
        if body.get("completion_window") != "24h":
            return self.error(400, "Invalid value for 'completion_window': only '24h' is supported",
                              param="completion_window")
        meta = body.get("metadata") or {}
        if len(meta) > 16 or any(len(k) > 64 or not isinstance(v, str) or len(v) > 512 for k, v in meta.items()):
            return self.error(400, "Invalid 'metadata': at most 16 pairs, keys of 64 and string values of 512 "
                                   "characters", param="metadata")
        f = self.files.get(body.get("input_file_id"))
        if f is None or f["purpose"] != "batch":
            return self.error(400, f"Invalid 'input_file_id': {body.get('input_file_id')!r} is not a file of "
                                   "purpose 'batch'", param="input_file_id")
        bid = f"batch_{len(self.batches) + 1:06d}"
        self.batches[bid] = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                             "input_file_id": f["id"], "completion_window": "24h", "status": "validating",
                             "output_file_id": None, "error_file_id": None, "created_at": _now(),
                             "in_progress_at": None, "expires_at": _now() + 86400, "finalizing_at": None,
                             "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
                             "cancelled_at": None, "request_counts": {"total": 0, "completed": 0, "failed": 0},
                             "metadata": meta or None, "_polls": 0, "_requests": []}
        self.created.append(bid)
        await self.hold_create()
        return web.json_response(self._batch(bid))

    def _batch(self, bid: str) -> dict:
        return {k: v for k, v in self.batches[bid].items() if not k.startswith("_")}

    async def list_batches(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        ids = list(reversed(self.created))
        after = request.query.get("after")
        if after in ids:
            ids = ids[ids.index(after) + 1:]
        limit = int(request.query.get("limit", 20))
        page = [self._batch(b) for b in ids[:limit]]
        return web.json_response({"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                                  "last_id": page[-1]["id"] if page else None, "has_more": len(ids) > limit})

    async def retrieve(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        bid = request.match_info["id"]
        if bid not in self.batches:
            return self.error(404, f"No batch found with id '{bid}'.", param="batch_id")
        self.step(bid)
        return web.json_response(self._batch(bid))

    def _validate(self, b: dict) -> list[dict]:
        data = self.files[b["input_file_id"]]["data"]
        if len(data) > self.max_bytes:
            return [{"code": "file_too_large", "message": f"The batch input file is larger than the {self.max_bytes} "
                                                          "maximum", "param": None, "line": None}]
        lines = [ln for ln in data.decode().split("\n") if ln.strip()]
        if len(lines) > self.max_requests:
            return [{"code": "too_many_requests", "message": f"The batch has {len(lines)} requests, over the "
                                                             f"{self.max_requests} maximum", "param": None, "line": None}]
        seen, models = set(), set()
        for n, ln in enumerate(lines, 1):
            try:
                req = json.loads(ln)
            except ValueError:
                return [{"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.",
                         "param": None, "line": n}]
            cid = req.get("custom_id")
            if not isinstance(cid, str) or cid in seen:
                return [{"code": "duplicate_custom_id", "message": f"custom_id {cid!r} is missing or repeated",
                         "param": "custom_id", "line": n}]
            if req.get("method") != "POST" or req.get("url") != b["endpoint"] or not isinstance(req.get("body"), dict):
                return [{"code": "invalid_request", "message": "method must be POST and url the batch's endpoint",
                         "param": "url", "line": n}]
            seen.add(cid)
            models.add(req["body"].get("model"))
            b["_requests"].append((cid, req["body"]))
        if len(models) > 1:
            return [{"code": "mismatched_model", "message": "every request of a batch must use the same model",
                     "param": "body.model", "line": None}]
        return []

    def step(self, bid: str) -> None:
        """One step of the batch's life (see the module docstring)."""
        b = self.batches[bid]
        if b["status"] == "validating":
            errors = self._validate(b)
            if errors:
                b.update(status="failed", failed_at=_now(), errors={"object": "list", "data": errors})
                return
            b.update(status="in_progress", in_progress_at=_now())
            b["request_counts"]["total"] = len(b["_requests"])
        elif b["status"] == "in_progress":
            b["_polls"] += 1
            if b["_polls"] >= self.polls:
                expire = self.expire_next > 0
                self.expire_next -= int(expire)
                self._finish(b, self.expire_keep if expire else None, "batch_expired")
                b["_final"] = "expired" if expire else "completed"
                b.update(status="finalizing", finalizing_at=_now())
        elif b["status"] == "finalizing":
            b.update(status=b["_final"], **{f"{b['_final']}_at": _now()})
        elif b["status"] == "cancelling":
            self._finish(b, 0, "batch_cancelled")
            b.update(status="cancelled", cancelled_at=_now())

    def _finish(self, b: dict, keep: int | None, why: str) -> None:
        out, err = [], []
        messages = {"batch_expired": "This request could not be executed before the completion window expired.",
                    "batch_cancelled": "This request was not executed because the batch was cancelled."}
        for n, (cid, status, payload, reason) in enumerate(self.run_lines(b, b["_requests"], keep, why)):
            line = {"id": f"batch_req_{b['id']}_{n}", "custom_id": cid, "response": None, "error": None}
            if status is None:
                line["error"] = {"code": reason, "message": messages[reason]}
            elif status == 500:
                line["response"] = {"status_code": 500, "request_id": f"req_{n}", "body": {"error": {
                    "message": "The server had an error while processing your request.", "type": "server_error",
                    "param": None, "code": None}}}
            else:
                line["response"] = {"status_code": status, "request_id": f"req_{n}", "body": payload}
            (out if status == 200 else err).append(line)
        name = b["id"]
        if out:
            b["output_file_id"] = self._file("".join(json.dumps(x) + "\n" for x in out).encode(),
                                             f"{name}_output.jsonl", "batch_output")["id"]
        if err:
            b["error_file_id"] = self._file("".join(json.dumps(x) + "\n" for x in err).encode(),
                                            f"{name}_error.jsonl", "batch_output")["id"]
        b["request_counts"].update(completed=len(out), failed=len(err))
        b["_requests"] = []

    def cancel(self, bid: str) -> dict:
        """Cancel a batch (as from the provider's dashboard, or the route below)."""
        b = self.batches[bid]
        if b["status"] not in ("validating", "in_progress"):
            return {"error": f"Cannot cancel a batch with status '{b['status']}'."}
        if b["status"] == "validating" and self._validate(b):
            b["_requests"] = []
        b.update(status="cancelling", cancelling_at=_now())
        return self._batch(bid)

    async def cancel_route(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        bid = request.match_info["id"]
        if bid not in self.batches:
            return self.error(404, f"No batch found with id '{bid}'.", param="batch_id")
        answer = self.cancel(bid)
        return self.error(400, answer["error"]) if "error" in answer else web.json_response(answer)


def write_dialogues(run_dir, n: int, rounds: int = 2, language: str = "en", start: int = 0) -> list[str]:
    """`n` completed dialogues into a run folder (numbered from `start`), each its own (distinct turns),
    `rounds` rounds long; their ids."""
    from esc_eval.sim.runs.records import dialogue_id, dialogue_row
    from esc_eval.sim.runs.runfolder import RunFolder

    rows = []
    for i in range(start, start + n):
        turns = [{"index": 0, "speaker": "assistant", "text": "Hello, what would you like to talk about?"}]
        for r in range(rounds):
            turns.append({"index": len(turns), "speaker": "seeker", "text": f"I keep worrying about exam {i}, week {r}."})
            turns.append({"index": len(turns), "speaker": "assistant", "text": f"That sounds heavy ({i}.{r}); what "
                                                                                 "worries you most?"})
        rows.append(dialogue_row(run_id="batch-test", dialogue_id=dialogue_id(f"card-{i}", "fake/target", "fake/seeker",
                                                                               "official", 0),
                                 card_id=f"card-{i}", language=language, target_model="fake/target", turns=turns,
                                 n_turns=len(turns), status="ok"))
    RunFolder(run_dir).write_part("dialogues", rows)
    return [r["dialogue_id"] for r in rows]
