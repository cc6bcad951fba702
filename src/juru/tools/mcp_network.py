"""Where an agent's own MCP servers may be: every address of the server's host must be public.

The host is resolved and checked when the agent is saved, and again on each HTTP request Juru
sends to the server, which then goes to the address that was just checked (the TLS name and
the `Host` header stay the host name's), so a DNS answer that changes later cannot point a
call at loopback, link-local or private addresses.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

# Host name, port -> the addresses it resolves to.
Resolver = Callable[[str, int], Awaitable[list[str]]]


class AddressRefusedError(Exception):
    """The server's host is, or resolves to, an address agents' servers may not be at."""


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host`, in its order of preference."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def address_problem(address: str) -> str | None:
    """Why an agent's MCP server may not be at `address`, or None for a public address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global or ip.is_multicast:
        return "not a public address"
    return None


def _ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@dataclass
class NetworkPolicy:
    """Which addresses agents' own MCP servers may have (`allow_private`: any), and how host
    names are resolved (replaceable, so tests can make a name resolve differently)."""

    allow_private: bool
    resolve: Resolver = field(default=resolve_host)

    async def checked_addresses(self, host: str, port: int) -> list[str]:
        """The host's addresses, all allowed; `AddressRefusedError` naming the first that is
        not (or saying that the name does not resolve)."""
        if _ip_literal(host):
            addresses = [host.strip("[]")]
        else:
            try:
                addresses = await self.resolve(host, port)
            except (OSError, UnicodeError):
                # UnicodeError: a name that IDNA cannot encode (an empty or 64-character label).
                raise AddressRefusedError(f"the host {host!r} does not resolve") from None
            if not addresses:
                raise AddressRefusedError(f"the host {host!r} does not resolve")
        if self.allow_private:
            return addresses
        for address in addresses:
            problem = address_problem(address)
            if problem is not None:
                raise AddressRefusedError(
                    f"the host {host!r} is at {address}, {problem}; MCP servers of agents must "
                    "be on public addresses"
                )
        return addresses

    def http_client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
        auth: httpx.Auth | None = None,
    ) -> httpx.AsyncClient:
        """An HTTP client for one MCP session to an agent's server (an MCP SDK client factory):
        each request checked, and pinned to the checked address."""
        transport = httpx.AsyncHTTPTransport() if self.allow_private else PinnedTransport(self)
        return httpx.AsyncClient(
            headers=headers, timeout=timeout or httpx.Timeout(30.0), auth=auth, transport=transport
        )


class PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to an address of its host that the policy allows."""

    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        try:
            addresses = await self.policy.checked_addresses(host, port)
        except AddressRefusedError as error:
            raise httpx.ConnectError(str(error), request=request) from None
        if not _ip_literal(host):
            # The Host header was set from the name when the request was built; TLS checks
            # the certificate against the name through `sni_hostname`.
            request.url = request.url.copy_with(host=addresses[0])
            request.extensions = {**request.extensions, "sni_hostname": host}
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
