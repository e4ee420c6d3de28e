"""``ceiling serve``: an OpenAI-compatible chat-completions server for a local HF model.

Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions`` (``n`` = 1, no streaming),
``GET /health``. Concurrent requests are micro-batched: a single worker thread takes every
request waiting (up to ``max_batch``, same sampling parameters) and runs them as one
left-padded batch through :class:`~ceiling.policies._hf.HFPolicy`. Beyond the standard
fields the response carries ``ceiling`` = ``{"token_ids", "logprobs", "prompt_token_ids"}``
so a client can check what was sampled. Limits: no streaming, no tool-call fields (the
harness's JSON lives in the message text), no authentication (bind to loopback).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from ._types import Generation, PolicyRequest, SamplingParams


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | None = ""


class ChatRequest(BaseModel):
    """The subset of the OpenAI chat-completions request this server honours."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    temperature: float = Field(1.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = 1
    stream: bool = False


class _Batcher:
    """One worker thread; callers block on a Future for their Generation."""

    def __init__(self, policy: Any, max_batch: int = 16) -> None:
        self.policy = policy
        self.max_batch = max_batch
        self._q: queue.Queue[tuple[PolicyRequest, SamplingParams, Future[Generation]] | None] = \
            queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="ceiling-serve-batcher",
                                        daemon=True)
        self._thread.start()

    def submit(self, req: PolicyRequest, sp: SamplingParams) -> Future[Generation]:
        fut: Future[Generation] = Future()
        self._q.put((req, sp, fut))
        return fut

    def close(self) -> None:
        self._q.put(None)

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            batch = [item]
            time.sleep(0.002)  # let concurrent requests arrive
            while len(batch) < self.max_batch:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)
                    break
                batch.append(nxt)
            groups: dict[SamplingParams, list[tuple[PolicyRequest, Future[Generation]]]] = {}
            for req, sp, fut in batch:
                groups.setdefault(sp, []).append((req, fut))
            for sp, items in groups.items():
                try:
                    gens = self.policy.generate([r for r, _ in items], sp)
                except Exception as e:  # noqa: BLE001 - reported to each waiting request
                    for _, fut in items:
                        fut.set_exception(e)
                    continue
                for (_, fut), g in zip(items, gens, strict=True):
                    fut.set_result(g)


def create_app(policy: Any, *, model_name: str = "local", max_tokens_cap: int = 1024,
               max_batch: int = 16, request_timeout_s: float = 600.0) -> Any:
    """The FastAPI app serving ``policy`` (an HFPolicy) under ``model_name``."""
    from fastapi import FastAPI, HTTPException

    batcher = _Batcher(policy, max_batch=max_batch)
    app = FastAPI(title="ceiling serve", version="1")
    created = int(time.time())

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model",
                                            "created": created, "owned_by": "ceiling"}]}

    @app.post("/v1/chat/completions")
    def chat(body: ChatRequest) -> dict[str, Any]:
        if body.n != 1:
            raise HTTPException(400, "only n=1 is supported")
        if body.stream:
            raise HTTPException(400, "streaming is not supported")
        if body.model not in (None, "", model_name):
            raise HTTPException(404, f"model {body.model!r} is not served here "
                                     f"(this server serves {model_name!r})")
        stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
        limit = body.max_completion_tokens or body.max_tokens or 256
        sp = SamplingParams(temperature=body.temperature, top_p=body.top_p,
                            max_new_tokens=min(limit, max_tokens_cap), stop=stop, seed=body.seed)
        msgs = [{"role": m.role, "content": m.content or ""} for m in body.messages]
        fut = batcher.submit(PolicyRequest(messages=msgs), sp)
        try:
            g = fut.result(timeout=request_timeout_s)
        except TimeoutError:
            raise HTTPException(504, "generation timed out") from None
        if g.error:
            raise HTTPException(400, g.error)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": g.text},
                         "finish_reason": g.finish_reason}],
            "usage": {"prompt_tokens": len(g.prompt_token_ids),
                      "completion_tokens": len(g.token_ids),
                      "total_tokens": len(g.prompt_token_ids) + len(g.token_ids)},
            "ceiling": {"token_ids": g.token_ids, "logprobs": g.logprobs,
                        "prompt_token_ids": g.prompt_token_ids},
        }

    app.state.batcher = batcher
    app.router.add_event_handler("shutdown", batcher.close)
    return app


def serve(model: str, adapter: str | None = None, *, host: str = "127.0.0.1", port: int = 8000,
          model_name: str | None = None, device: str | None = None,
          log_level: str = "warning") -> None:
    """Load the model and serve it until interrupted (blocking)."""
    import uvicorn

    from ._hf import HFPolicy
    from ._load import resolve_builtin

    path = str(resolve_builtin(model.split(":", 1)[1])) if model.startswith("builtin:") else model
    policy = HFPolicy(path, adapter, device=device)
    app = create_app(policy, model_name=model_name or default_model_name(model, adapter))
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def default_model_name(model: str, adapter: str | None) -> str:
    from pathlib import Path

    base = model.split(":", 1)[1] if model.startswith("builtin:") else Path(model).name
    return f"{base}+{Path(adapter).name}" if adapter else base


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServerThread:
    """Run an ASGI app with uvicorn in a background thread (tests, in-process evals).

    ``with ServerThread(app) as srv: srv.url`` -> ``http://127.0.0.1:PORT/v1``.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int | None = None,
                 start_timeout_s: float = 20.0) -> None:
        import uvicorn

        self.host, self.port = host, port or free_port(host)
        self.url = f"http://{host}:{self.port}/v1"
        self.start_timeout_s = start_timeout_s
        cfg = uvicorn.Config(app, host=host, port=self.port, log_level="error", lifespan="off")
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, name="ceiling-serve", daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.time() + self.start_timeout_s
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the server on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
