"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, TEI, llama.cpp's server, the mock
server), so retrieval need not load torch on a machine whose model server also serves an embedder.

Specs (``--embedder`` / ``embedder:``): ``openai/<id>`` (OpenAI's API, key from OPENAI_API_KEY) or ``<id>@<url>``
(any endpoint; also ``vllm/<id>@<url>``). Texts are sent in batches, each request as the OpenAI SDK sends it and
bounded like a chat call (`skilltransfer.util.http_client`: a deadline per request, a size bound on the answer);
429s, 5xx, a passed deadline, an answer over the bound, dropped connections and unusable answers are retried within a
time budget as chat calls are (`skilltransfer.llm.retry`); a stream caches the vectors on disk (`CachedEmbedder`) as
it does a local model's.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from skilltransfer.errors import InputError
from skilltransfer.llm.config import OPENAI_URL
from skilltransfer.llm.retry import (
    ModelCallError,
    RetryPolicy,
    TransientModelError,
    call_with_retries,
    requested_wait,
)
from skilltransfer.untrusted import UntrustedFileError, parse_json
from skilltransfer.util import secrets
from skilltransfer.util.http_client import (
    MAX_ANSWER_BYTES,
    HttpClient,
    HttpFailure,
    encode_json,
    openai_headers,
    shown_url,
)
from skilltransfer.util.urls import split_at_url


def is_endpoint_spec(spec: str) -> bool:
    """Whether an embedder spec names an endpoint (``openai/<id>``, ``<id>@<url>``)."""
    return spec.startswith(("openai/", "vllm/")) or split_at_url(spec) is not None


def parse_endpoint_spec(spec: str) -> tuple[str, str]:
    """(model id, base URL) of an endpoint embedder spec (``<id>@<url>`` split as ``--model`` splits it: a URL may
    carry credentials).

    Raises:
        InputError: no model id, or a provider prefix without ``@<url>`` other than ``openai/`` (the message shows
            the spec without credentials).
    """
    rest = spec.removeprefix("vllm/") if spec.startswith("vllm/") else spec
    at_url = split_at_url(rest)
    if at_url is not None:
        model_id, url = at_url[0].removeprefix("openai/").strip(), at_url[1]
    elif spec.startswith("openai/"):
        model_id, url = spec.removeprefix("openai/").strip(), OPENAI_URL
    else:
        model_id, url = "", ""
    if not model_id or not url.startswith(("http://", "https://")):
        shown = f"{at_url[0]}@{shown_url(at_url[1])}" if at_url is not None else spec
        raise InputError(f"embedder {shown!r}: write openai/<id> (e.g. openai/text-embedding-3-small) or "
                         "<id>@<url> (e.g. BAAI/bge-m3@http://gpu:8000/v1)")
    return model_id, url.rstrip("/")


class EndpointEmbedder:
    """An `Embedder` over ``POST <url>/embeddings``.

    Args:
        model_id: the embedding model the endpoint serves.
        base_url: the OpenAI-compatible base URL (ending in ``/v1``).
        api_key: the key (default: OPENAI_API_KEY; local servers accept any).
        batch_size: texts per request.
        timeout_s: the deadline of one request (connecting, sending and the complete answer).
        retry_budget_s: how long one batch keeps retrying transient failures.
        backoff_base_s: first backoff window (0: no waits, tests).
        max_answer_bytes: the largest answer accepted.
    """

    def __init__(self, model_id: str, base_url: str, *, api_key: str | None = None, batch_size: int = 64,
                 timeout_s: float = 60.0, retry_budget_s: float = 300.0, backoff_base_s: float = 1.0,
                 max_retries: int | None = None, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        key = secrets.api_key(api_key, "the embedder's api_key") if api_key else secrets.api_key(
            os.environ.get("OPENAI_API_KEY"))
        if base_url == OPENAI_URL and not key:
            raise InputError(f"embedder openai/{model_id} needs an API key: set OPENAI_API_KEY")
        self.model_id, self.base_url, self.batch_size = model_id, base_url, max(1, batch_size)
        self.policy = RetryPolicy(max_retries, backoff_base_s, 30.0, budget_s=retry_budget_s)
        self._http = HttpClient(base_url, openai_headers(key), deadline_s=timeout_s, max_bytes=max_answer_bytes)
        self._dim: int | None = None
        self.requests = 0
        """Requests sent (batches, retries included)."""

    @property
    def id(self) -> str:
        """``api:<model id>``: the same model served at another URL reads the same index and cache."""
        return f"api:{self.model_id}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 rows, one per text, in order."""
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t if t.strip() else " " for t in texts[start:start + self.batch_size]]  # "" is refused
            rows += call_with_retries(lambda b=batch: self._send(b), self.policy,  # type: ignore[misc]
                                      what=f"embedding endpoint {self._http.shown}")
        if not rows:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        matrix = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = np.ascontiguousarray(matrix / np.where(norms == 0, 1.0, norms), dtype=np.float32)
        self._dim = matrix.shape[1]
        return matrix

    def _send(self, batch: list[str]) -> list[list[float]]:
        """POST one batch (as the SDK sends ``embeddings.create(model=..., input=..., encoding_format="float")``); its
        vectors in input order, or the error the answer means."""
        self.requests += 1
        body = encode_json({"model": self.model_id, "input": batch, "encoding_format": "float"})
        try:
            answer = self._http.post_json("/embeddings", body)
        except HttpFailure as exc:
            raise TransientModelError(exc.kind, str(exc)) from None
        if answer.status == 429 or answer.status >= 500 or answer.status == 408:
            wait = requested_wait(answer.headers)
            kind, what = ("rate_limit", "429 Too Many Requests") if answer.status == 429 else \
                ("server_error", f"HTTP {answer.status}")
            raise TransientModelError(kind, what, retry_after_s=wait)
        if answer.status >= 300:
            raise ModelCallError(f"embedding endpoint {self._http.shown} refused the request for model "
                                 f"{self.model_id!r} (HTTP {answer.status}): check --embedder")
        return _vectors(answer.body, len(batch))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()


def _vectors(body: bytes, expected: int) -> list[list[float]]:
    """The vectors of an embeddings answer, in input order (by ``index``).

    Raises:
        TransientModelError: "bad_response": not JSON, another count than ``expected``, or a vector that is not a
            non-empty list of finite numbers, or rows of different lengths.
    """
    try:
        payload = parse_json(body, "the answer")  # bounded in depth before it is parsed
    except UntrustedFileError as exc:
        raise TransientModelError("bad_response", f"unparsable response ({str(exc)[:200]})") from None
    data = payload.get("data") if isinstance(payload, dict) else None
    rows = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
    if len(rows) != expected:
        raise TransientModelError("bad_response", f"{len(rows)} embeddings for {expected} texts")
    rows.sort(key=lambda d: index if isinstance(index := d.get("index"), int) else 0)
    vectors = [d.get("embedding") for d in rows]
    if not all(isinstance(v, list) and v and all(_number(x) for x in v) for v in vectors) or \
            len({len(v) for v in vectors if isinstance(v, list)}) > 1:
        raise TransientModelError("bad_response", "an embedding is not a list of numbers of the common length")
    return [[float(x) for x in v] for v in vectors if isinstance(v, list)]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
