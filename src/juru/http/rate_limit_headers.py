"""Adds the `X-RateLimit-*` figures of an admitted `/v1` request to its response, whatever the
route returned (a model, a `JSONResponse` or a stream)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from juru.http.deps import RATE_LIMIT_HEADERS


class RateLimitHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = scope.get("state", {}).get(RATE_LIMIT_HEADERS)
                if extra:
                    present = {name.lower() for name, _ in message.get("headers", [])}
                    message["headers"] = [
                        *message.get("headers", []),
                        *(
                            (name.lower().encode(), value.encode())
                            for name, value in extra.items()
                            if name.lower().encode() not in present
                        ),
                    ]
            await send(message)

        await self.app(scope, receive, send_with_headers)
