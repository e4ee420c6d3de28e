"""The ``openai`` policy: one or several OpenAI-compatible ``/v1/chat/completions``
endpoints.

Endpoints: ``openai:MODEL@URL`` or ``openai:MODEL@URL1,URL2,...`` (e.g. several vLLM or
``ceiling serve`` instances on GPU nodes). Each request goes to the healthy endpoint with
the fewest requests in flight (ties: round robin), so a batch spreads over all of them.

Health and retry: an endpoint that refuses the connection is marked down for
``cooldown_s`` (doubling while it stays down, at most 60 s) and the request moves at once
to another endpoint; after the cooldown one request probes it again and a success makes it
healthy. A timeout, a 429 or a 5xx answer is retried with exponential backoff on the next
endpoint, up to ``retries`` times. Per-request failures (a timeout, a malformed body, a 4xx)
become ``Generation(error=...)`` so only that episode is marked infra_error. When *every*
request of a batch failed to connect to every endpoint, the service is down:
:class:`~ceiling.PolicyError` names the URLs and how to start a server.
``endpoint_stats()`` reports per endpoint: requests served, failures, healthy.

Token ids and log-probs are not part of this API: the lists stay empty (``usage`` counts are
kept as the token totals) unless the server adds ``ceiling serve``'s ``ceiling`` extension
field.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Self

import httpx

from .._errors import PolicyError
from ._types import Generation, PolicyRequest, SamplingParams

MAX_COOLDOWN_S = 60.0


class _Unreachable(Exception):
    pass


def normalise_base_url(url: str) -> str:
    """``http://host:port`` -> ``http://host:port/v1``; a given path is kept."""
    if not url.startswith(("http://", "https://")):
        raise PolicyError(f"endpoint URL {url!r} must start with http:// or https://",
                          fix="write the spec as openai:MODEL@http://127.0.0.1:8000/v1 "
                              "(several: URL1,URL2)")
    url = url.rstrip("/")
    rest = url.split("://", 1)[1]
    return url if "/" in rest else url + "/v1"


def split_base_urls(base_url: str | Sequence[str]) -> list[str]:
    """One URL, a comma-separated list or a sequence -> normalised, distinct URLs."""
    raw = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = [normalise_base_url(u.strip()) for u in raw if u.strip()]
    if not urls:
        raise PolicyError("the openai policy needs at least one endpoint URL",
                          fix="e.g. openai:tiny@http://127.0.0.1:8000/v1")
    return list(dict.fromkeys(urls))


@dataclass
class _Endpoint:
    url: str
    in_flight: int = 0
    served: int = 0
    failures: int = 0
    down_until: float = 0.0  # monotonic time; 0 = healthy
    cooldown_s: float = 0.0

    def healthy(self, now: float) -> bool:
        return self.down_until <= now


class OpenAIPolicy:
    """Chat completions over HTTP with retries, timeouts, a concurrency cap per endpoint
    and several endpoints (see the module docstring)."""

    def __init__(self, model: str, base_url: str | Sequence[str], *,
                 api_key: str | None = None, timeout_s: float = 60.0, retries: int = 2,
                 backoff_s: float = 0.5, concurrency: int = 8, cooldown_s: float = 2.0,
                 spec: str | None = None) -> None:
        self.model = model
        self.base_urls = split_base_urls(base_url)
        self.base_url = self.base_urls[0]
        shown = base_url if isinstance(base_url, str) else ",".join(base_url)
        self.spec = spec or f"openai:{model}@{shown}"
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.cooldown_s = cooldown_s
        self.concurrency = max(1, concurrency)
        self._eps = [_Endpoint(u) for u in self.base_urls]
        self._lock = threading.Lock()
        self._rr = 0
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
            limits=httpx.Limits(max_connections=self.concurrency * len(self._eps)),
        )
        self.tokenizer = None

    def close(self) -> None:
        """Close the HTTP connection pool (also done when the policy is collected)."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """Per endpoint URL: ``served`` (answered requests), ``failures`` (failed attempts)
        and ``healthy`` (not in a cooldown now)."""
        now = time.monotonic()
        with self._lock:
            return {e.url: {"served": e.served, "failures": e.failures,
                            "healthy": e.healthy(now)} for e in self._eps}

    # ------------------------------------------------------------------ endpoints
    def _acquire(self, avoid: set[str]) -> _Endpoint | None:
        """The healthy endpoint with the fewest requests in flight (skipping ``avoid``);
        None when every endpoint not avoided is cooling down."""
        now = time.monotonic()
        with self._lock:
            n = len(self._eps)
            order = [self._eps[(self._rr + i) % n] for i in range(n)]
            self._rr = (self._rr + 1) % n
            ok = [e for e in order if e.url not in avoid and e.healthy(now)]
            if not ok:
                return None
            ep = min(ok, key=lambda e: e.in_flight)
            ep.in_flight += 1
            return ep

    def _release(self, ep: _Endpoint, *, ok: bool, down: bool = False) -> None:
        with self._lock:
            ep.in_flight -= 1
            if ok:
                ep.served += 1
                ep.down_until, ep.cooldown_s = 0.0, 0.0
                return
            ep.failures += 1
            if down:
                ep.cooldown_s = min(MAX_COOLDOWN_S, max(self.cooldown_s, ep.cooldown_s * 2))
                ep.down_until = time.monotonic() + ep.cooldown_s

    def _payload(self, req: PolicyRequest, sp: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model, "messages": req.messages, "temperature": sp.temperature,
            "top_p": sp.top_p, "max_tokens": sp.max_new_tokens, "n": 1,
        }
        if sp.stop:
            body["stop"] = list(sp.stop)
        if sp.seed is not None:
            body["seed"] = sp.seed
        return body

    def _one(self, req: PolicyRequest, sp: SamplingParams) -> Generation:
        last = ""
        connect_only = True
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random()))
            tried: set[str] = set()
            while True:  # a refused connection moves on to the next endpoint at once
                ep = self._acquire(tried)
                if ep is None:
                    if not tried:  # every endpoint is cooling down
                        last = last or "every endpoint is marked down"
                    break
                tried.add(ep.url)
                res = self._post(ep, req, sp)
                if isinstance(res, Generation):
                    return res
                kind, last = res
                if kind != "connect":
                    connect_only = False
                    break  # timeouts and 5xx: back off, then retry (on the next endpoint)
        if connect_only:
            raise _Unreachable(last)
        return Generation(text="", finish_reason="error", error=last)

    def _post(self, ep: _Endpoint, req: PolicyRequest,
              sp: SamplingParams) -> Generation | tuple[str, str]:
        """One attempt on one endpoint: a Generation (done, maybe with an error the server
        gave) or ``(kind, message)`` to retry, kind ``connect`` or ``retry``."""
        url = f"{ep.url}/chat/completions"
        try:
            r = self._client.post(url, json=self._payload(req, sp))
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            self._release(ep, ok=False, down=True)
            return "connect", f"cannot connect to {url}: {e}"
        except httpx.TimeoutException:
            self._release(ep, ok=False)
            return "retry", f"the endpoint did not answer within {self.timeout_s:g} s ({url})"
        except httpx.HTTPError as e:
            # a server killed mid-request drops the connection: treat it as down
            self._release(ep, ok=False, down=True)
            return "retry", f"HTTP error talking to {url}: {type(e).__name__}: {e}"
        if r.status_code == 429 or r.status_code >= 500:
            self._release(ep, ok=False)
            return "retry", f"the endpoint answered {r.status_code}: {r.text[:200]}"
        self._release(ep, ok=r.status_code < 400)
        if r.status_code >= 400:
            return Generation(text="", finish_reason="error",
                              error=f"the endpoint refused the request ({r.status_code}): "
                                    f"{r.text[:300]}")
        return self._decode(r)

    def _decode(self, r: httpx.Response) -> Generation:
        try:
            data = r.json()
            choice = data["choices"][0]
            text = choice["message"]["content"]
            if text is None:
                text = ""
            if not isinstance(text, str):
                raise TypeError("message.content is not a string")
        except Exception as e:  # noqa: BLE001 - becomes Generation(error=...)
            return Generation(text="", finish_reason="error",
                              error=f"invalid response from the endpoint ({type(e).__name__}: "
                                    f"{e}): {r.text[:200]!r}")
        finish = choice.get("finish_reason") or "stop"
        gen = Generation(text=text, finish_reason="length" if finish == "length" else "stop")
        usage = data.get("usage") or {}
        # no token ids over this API: keep the totals so trajectories still count tokens
        gen.usage = {k: int(v) for k, v in usage.items() if isinstance(v, int)}
        extra = data.get("ceiling")  # `ceiling serve` also returns what it sampled
        if isinstance(extra, dict):
            gen.token_ids = [int(t) for t in extra.get("token_ids", [])]
            gen.logprobs = [float(x) for x in extra.get("logprobs", [])]
            gen.prompt_token_ids = [int(t) for t in extra.get("prompt_token_ids", [])]
        return gen

    def generate(self, requests: Sequence[PolicyRequest],
                 sampling: SamplingParams) -> list[Generation]:
        if not requests:
            return []
        results: list[Generation | Exception] = []
        width = min(self.concurrency * len(self._eps), len(requests))
        with ThreadPoolExecutor(max_workers=width) as pool:
            futs = [pool.submit(self._one, r, sampling) for r in requests]
            for f in futs:
                try:
                    results.append(f.result())
                except Exception as e:  # noqa: BLE001 - becomes Generation(error=...)
                    results.append(e)
        if all(isinstance(x, _Unreachable) for x in results):
            what = (f"the endpoint {self.base_url} is not reachable" if len(self._eps) == 1
                    else f"none of the endpoints {', '.join(self.base_urls)} is reachable")
            raise PolicyError(f"{what} ({results[0]})",
                              fix="start it (for a local model: `ceiling serve --model PATH`) "
                                  "or check the URL in the spec")
        out = []
        for x in results:
            if isinstance(x, Generation):
                out.append(x)
            else:
                out.append(Generation(text="", finish_reason="error", error=str(x)))
        return out
