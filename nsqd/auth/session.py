"""One connection's AUTH: its secret, the cached grants and the checks before PUB, MPUB, DPUB and
SUB. Fed identity facts (remote IP, TLS, certificate name), not a connection object."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.v2 import ErrorCode, NSQError
from protocol.v2.gostr import go_quote

from ..gocompat.json import go_json
from ..log import log
from .authd import query_any_authd
from .grants import AuthError, AuthState, everything

if TYPE_CHECKING:
    from ..node import Node


@dataclass(frozen=True)
class Identity:
    """What the auth server is told about a connection."""

    remote_ip: str
    tls: bool
    common_name: str  # of the client's TLS certificate, "" without one


class ClientAuth:
    """One connection's AUTH secret and cached authorizations."""

    def __init__(
        self, node: Node, name: str, facts: Callable[[], Identity], trusted_only: bool = False
    ) -> None:
        self.node = node
        # only Node.trusted_secrets, no auth server: a group's private link listener under
        # --tls-required, where the group's secret stands in for TLS
        self._trusted_only = trusted_only
        self.name = name  # for the log
        self._facts = facts  # read at each query: TLS may have been negotiated since
        self.secret = b""
        self.state: AuthState | None = None

    # /stats
    @property
    def authed(self) -> bool:
        """nsqd's HasAuthorizations."""
        return self.state is not None and bool(self.state.authorizations)

    @property
    def identity(self) -> str:
        return self.state.identity if self.state is not None else ""

    @property
    def identity_url(self) -> str:
        return self.state.identity_url if self.state is not None else ""

    async def _query(self) -> None:
        if self.secret in self.node.trusted_secrets:
            self.state = everything()
            return
        if self._trusted_only:
            raise AuthError("only the group's secret is granted on its private listener")
        facts = self._facts()
        self.state = await query_any_authd(
            self.node, facts.remote_ip, facts.tls, facts.common_name, self.secret
        )

    async def auth(self, secret: bytes) -> bytes:
        """AUTH: the response body, or nsqd's error."""
        if self.authed:
            raise NSQError(ErrorCode.E_INVALID, "AUTH already set")
        self.secret = secret
        try:
            await self._query()
        except AuthError as exc:
            log.warning("PROTOCOL(V2): [%s] AUTH failed %s", self.name, exc)
            raise NSQError(ErrorCode.E_AUTH_FAILED, "AUTH failed") from exc
        state = self.state
        assert state is not None
        if not state.authorizations:
            raise NSQError(ErrorCode.E_UNAUTHORIZED, "AUTH no authorizations found")
        return go_json(
            {
                "identity": state.identity,
                "identity_url": state.identity_url,
                "permission_count": len(state.authorizations),
            }
        )

    async def check(self, verb: str, topic: str, channel: str = "") -> None:
        """nsqd's CheckAuth before PUB, MPUB, DPUB and SUB (re-asking after the TTL)."""
        if not self.authed:
            raise NSQError(ErrorCode.E_AUTH_FIRST, f"AUTH required before {verb}")
        assert self.state is not None
        if self.state.is_expired():
            try:
                await self._query()
            except AuthError as exc:
                log.warning("PROTOCOL(V2): [%s] AUTH failed %s", self.name, exc)
                raise NSQError(ErrorCode.E_AUTH_FAILED, "AUTH failed") from exc
        if not self.state.is_allowed(topic, channel):
            raise NSQError(
                ErrorCode.E_UNAUTHORIZED,
                f"AUTH failed for {verb} on {go_quote(topic.encode())} "
                f"{go_quote(channel.encode())}",
            )
