"""What the sync and async clients share around sending a `Call`: where and with which key,
which failures are retried and how long to wait (tenacity), and turning an answer into the
value or the error."""

from __future__ import annotations

import os
from typing import Any, TypeVar

import httpx
from tenacity import RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

import juru
from juru.client._calls import DEFAULT_BASE_URL, Call
from juru.client.errors import APIConnectionError, RateLimitError, ServerError, error_from_response

T = TypeVar("T")
DEFAULT_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_RETRIES = 3
LONGEST_RETRY_WAIT_SECONDS = 60.0
_backoff = wait_exponential_jitter(multiplier=0.5, max=8)


def base_url_of(base_url: str | None) -> str:
    return (base_url or os.environ.get("JURU_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def headers_for(api_key: str | None) -> dict[str, str]:
    key = api_key if api_key is not None else os.environ.get("JURU_API_KEY")
    headers = {"User-Agent": f"juru-client/{juru.__version__}"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def request_options(call: Call[Any]) -> dict[str, Any]:
    options: dict[str, Any] = {"params": call.params, "headers": dict(call.headers)}
    if call.json is not None:
        options["json"] = call.json
    if call.files is not None:
        options["files"] = call.files
        options["data"] = call.data
    return options


def read(call: Call[T], response: httpx.Response) -> T:
    if response.is_error:
        raise error_from_response(response)
    return call.read(response)


def retry_policy(call: Call[Any], max_retries: int) -> dict[str, Any]:
    """tenacity's options for sending `call`: a 429 or a 503 (the request was not served) is
    sent again, a broken connection only when sending twice does no harm or nothing was sent;
    the wait is the server's Retry-After when it gave one, else a jittered backoff."""

    def retryable(error: BaseException) -> bool:
        if isinstance(error, RateLimitError):
            return True
        if isinstance(error, ServerError):
            return error.status == 503
        if isinstance(error, APIConnectionError):
            never_sent = isinstance(error.__cause__, httpx.ConnectError | httpx.ConnectTimeout)
            return never_sent or call.safe_to_repeat
        return False

    return {
        "retry": retry_if_exception(retryable),
        "stop": stop_after_attempt(max_retries + 1),
        "wait": wait_before_retry,
        "reraise": True,
    }


def wait_before_retry(state: RetryCallState) -> float:
    error = state.outcome.exception() if state.outcome else None
    advice = getattr(error, "retry_after", None)
    if advice is None and isinstance(error, ServerError) and error.response is not None:
        advice = error.response.headers.get("retry-after")
    if advice is not None:
        try:
            return min(float(advice), LONGEST_RETRY_WAIT_SECONDS)
        except ValueError:
            pass
    return float(_backoff(state))


def connection_error(error: httpx.TransportError, base_url: str) -> APIConnectionError:
    failure = APIConnectionError(f"could not talk to the Juru server at {base_url}: {error}")
    failure.__cause__ = error
    return failure
