"""The ``openai`` policy: any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Requests run in a thread pool capped at ``concurrency`` in flight; each is retried with
exponential backoff on connection errors, 429 and 5xx answers. Per-request failures (a
timeout, a malformed body, a 4xx) become ``Generation(error=...)`` so only that episode is
marked infra_error. When *every* request of a batch failed to connect, the endpoint is down:
:class:`~ceiling.PolicyError` names the URL and how to start a server. Token ids and
log-probs are not part of this API: the lists stay empty (``usage`` counts are kept as the
token totals) unless the server adds ``ceiling serve``'s ``ceiling`` extension field.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

import httpx

from .._errors import PolicyError
from ._types import Generation, PolicyRequest, SamplingParams


class _Unreachable(Exception):
    pass


def normalise_base_url(url: str) -> str:
    """``http://host:port`` -> ``http://host:port/v1``; a given path is kept."""
    if not url.startswith(("http://", "https://")):
        raise PolicyError(f"endpoint URL {url!r} must start with http:// or https://",
                          fix="write the spec as openai:MODEL@http://127.0.0.1:8000/v1")
    url = url.rstrip("/")
    rest = url.split("://", 1)[1]
    return url if "/" in rest else url + "/v1"


class OpenAIPolicy:
    """Chat completions over HTTP with retries, timeouts and a concurrency cap."""

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None,
                 timeout_s: float = 60.0, retries: int = 2, backoff_s: float = 0.5,
                 concurrency: int = 8, spec: str | None = None) -> None:
        self.model = model
        self.base_url = normalise_base_url(base_url)
        self.spec = spec or f"openai:{model}@{base_url}"
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.concurrency = max(1, concurrency)
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
            limits=httpx.Limits(max_connections=self.concurrency),
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
        url = f"{self.base_url}/chat/completions"
        last = ""
        connect_failures = 0
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random()))
            try:
                r = self._client.post(url, json=self._payload(req, sp))
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                connect_failures += 1
                last = f"cannot connect to {url}: {e}"
                continue
            except httpx.TimeoutException:
                last = f"the endpoint did not answer within {self.timeout_s:g} s ({url})"
                continue
            except httpx.HTTPError as e:
                last = f"HTTP error talking to {url}: {type(e).__name__}: {e}"
                continue
            if r.status_code == 429 or r.status_code >= 500:
                last = f"the endpoint answered {r.status_code}: {r.text[:200]}"
                continue
            if r.status_code >= 400:
                return Generation(text="", finish_reason="error",
                                  error=f"the endpoint refused the request ({r.status_code}): "
                                        f"{r.text[:300]}")
            return self._decode(r)
        if connect_failures == self.retries + 1:
            raise _Unreachable(last)
        return Generation(text="", finish_reason="error", error=last)

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
        results: list[Generation | BaseException] = []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            futs = [pool.submit(self._one, r, sampling) for r in requests]
            for f in futs:
                try:
                    results.append(f.result())
                except BaseException as e:  # noqa: BLE001 - becomes Generation(error=...)
                    results.append(e)
        if all(isinstance(x, _Unreachable) for x in results):
            raise PolicyError(f"the endpoint {self.base_url} is not reachable "
                              f"({results[0]})",
                              fix="start it (for a local model: `ceiling serve --model PATH`) "
                                  "or check the URL in the spec")
        out = []
        for x in results:
            if isinstance(x, Generation):
                out.append(x)
            else:
                out.append(Generation(text="", finish_reason="error", error=str(x)))
        return out
