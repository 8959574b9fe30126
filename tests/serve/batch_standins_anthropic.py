"""Anthropic's Message Batches as strict as the real API (see batch_standins.py, which describes both
batch stand-ins and holds what they share)."""
from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections import Counter

from aiohttp import web

from api_standins import StrictAnthropic
from batch_standins import _Lifecycle

CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat().replace("+00:00", "Z")


class BatchAnthropic(_Lifecycle, StrictAnthropic):
    """See the module docstring."""

    def __init__(self, *, key: str | None = "ak-local", max_requests: int = 100_000, max_bytes: int = 256 * 2**20,
                 **lifecycle):
        super().__init__(key=key)
        self.batch_setup(max_requests=max_requests, max_bytes=max_bytes, **lifecycle)

    def routes(self, app: web.Application) -> None:
        super().routes(app)
        app.router.add_post("/v1/messages/batches", self.create)
        app.router.add_get("/v1/messages/batches", self.list_batches)
        app.router.add_get("/v1/messages/batches/{id}", self.retrieve)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self.cancel_route)
        app.router.add_get("/v1/messages/batches/{id}/results", self.results)

    def auth(self, request: web.Request) -> web.Response | None:
        if self.key and request.headers.get("x-api-key") != self.key:
            return self.error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return self.error(400, "invalid_request_error", "anthropic-version: header is required")
        return None

    async def create(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        self.create_seen += 1
        raw = await request.read()
        if len(raw) > self.max_bytes:
            return self.error(413, "request_too_large", f"Request exceeds the maximum allowed number of bytes "
                                                        f"({self.max_bytes})")
        body = json.loads(raw)
        if set(body) != {"requests"} or not isinstance(body["requests"], list) or not body["requests"]:
            return self.error(400, "invalid_request_error", "requests: Field required (and nothing else)")
        if len(body["requests"]) > self.max_requests:
            return self.error(400, "invalid_request_error", f"requests: at most {self.max_requests} requests a batch")
        ids = [r.get("custom_id") for r in body["requests"]]
        bad = next((i for i in ids if not isinstance(i, str) or not CUSTOM_ID.match(i)), None)
        if bad is not None or len(set(ids)) != len(ids) or any(set(r) != {"custom_id", "params"} for r in body["requests"]):
            return self.error(400, "invalid_request_error", f"requests: custom_id must match ^[a-zA-Z0-9_-]{{1,64}}$ "
                                                            f"and be unique, with params ({bad!r})")
        bid = f"msgbatch_{len(self.batches) + 1:020d}"
        self.batches[bid] = {"id": bid, "type": "message_batch", "processing_status": "in_progress",
                             "request_counts": {"processing": len(ids), "succeeded": 0, "errored": 0, "canceled": 0,
                                                "expired": 0},
                             "ended_at": None, "created_at": _iso(time.time()), "expires_at": _iso(time.time() + 86400),
                             "archived_at": None, "cancel_initiated_at": None, "results_url": None,
                             "_polls": 0, "_requests": [(r["custom_id"], r["params"]) for r in body["requests"]],
                             "_results": None}
        self.created.append(bid)
        await self.hold_create()
        return web.json_response(self._batch(bid))

    def _batch(self, bid: str) -> dict:
        return {k: v for k, v in self.batches[bid].items() if not k.startswith("_")}

    async def list_batches(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        ids = list(reversed(self.created))
        after = request.query.get("after_id")
        if after in ids:
            ids = ids[ids.index(after) + 1:]
        limit = int(request.query.get("limit", 20))
        page = [self._batch(b) for b in ids[:limit]]
        return web.json_response({"data": page, "has_more": len(ids) > limit,
                                  "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None})

    async def retrieve(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        bid = request.match_info["id"]
        if bid not in self.batches:
            return self.error(404, "not_found_error", f"batch {bid} not found")
        self.step(bid, f"http://{request.host}")
        return web.json_response(self._batch(bid))

    def step(self, bid: str, base: str) -> None:
        b = self.batches[bid]
        if b["processing_status"] == "in_progress":
            b["_polls"] += 1
            if b["_polls"] > self.polls:
                expire = self.expire_next > 0
                self.expire_next -= int(expire)
                self._finish(b, self.expire_keep if expire else None, "expired", base)
        elif b["processing_status"] == "canceling":
            self._finish(b, 0, "canceled", base)

    def _finish(self, b: dict, keep: int | None, why: str, base: str) -> None:
        results = []
        for cid, status, payload, reason in self.run_lines(b, b["_requests"], keep, why):
            if status is None:
                result = {"type": reason}
            elif status == 200:
                result = {"type": "succeeded", "message": payload}
            elif status == 500:
                result = {"type": "errored", "error": {"type": "error", "error": {"type": "api_error",
                                                                                  "message": "Internal server error"}}}
            else:
                result = {"type": "errored", "error": payload}
            results.append({"custom_id": cid, "result": result})
        counts = Counter(r["result"]["type"] for r in results)
        b["request_counts"] = {"processing": 0, **{k: counts.get(k, 0) for k in ("succeeded", "errored", "canceled",
                                                                                  "expired")}}
        b.update(processing_status="ended", ended_at=_iso(time.time()), _results=results, _requests=[],
                 results_url=f"{base}/v1/messages/batches/{b['id']}/results")

    def cancel(self, bid: str) -> dict:
        b = self.batches[bid]
        if b["processing_status"] != "in_progress":
            return {"error": f"batch {bid} has ended"}
        b.update(processing_status="canceling", cancel_initiated_at=_iso(time.time()))
        return self._batch(bid)

    async def cancel_route(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        bid = request.match_info["id"]
        if bid not in self.batches:
            return self.error(404, "not_found_error", f"batch {bid} not found")
        answer = self.cancel(bid)
        return self.error(400, "invalid_request_error", answer["error"]) if "error" in answer else web.json_response(answer)

    async def results(self, request: web.Request) -> web.Response:
        if (denied := self.auth(request)) is not None:
            return denied
        b = self.batches.get(request.match_info["id"])
        if b is None or b["_results"] is None:
            return self.error(404, "not_found_error", "results are available once the batch has ended")
        return web.Response(body="".join(json.dumps(r) + "\n" for r in b["_results"]).encode(),
                            content_type="application/binary")
