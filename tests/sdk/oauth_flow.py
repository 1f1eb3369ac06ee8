"""The official MCP Python SDK signs in to state-http's /mcp the way Claude Code, VS Code or
Cursor would: the first request is refused with a pointer to the resource's metadata, the
client finds the issuer there, registers itself, runs the authorization-code flow with PKCE
and a resource indicator, and calls tools with the token it gets.

    python oauth_flow.py MCP_URL

The issuer (tests/sdk/idp.mjs) signs its user in and grants consent at once, so the
"browser" here only follows its redirects until the one back to the client, whose query
carries the code. Prints one line of JSON: what the tools answered.
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

# Never listened on: the browser stops at the redirect to it and hands its query over.
REDIRECT = "http://127.0.0.1:9/callback"


class Memory(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull):
        self.client = client_info


async def main(url: str) -> None:
    landed: dict[str, list[str]] = {}
    visited: list[str] = []

    async def browse(authorization_url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as browser:
            at = authorization_url
            for _ in range(12):
                visited.append(urlparse(at).path)
                response = await browser.get(at)
                location = response.headers.get("location")
                if not location:
                    raise SystemExit(f"the issuer stopped at {at}: {response.status_code} {response.text[:400]}")
                at = urljoin(at, location)
                if at.startswith(REDIRECT):
                    landed.update(parse_qs(urlparse(at).query))
                    return
            raise SystemExit(f"no redirect back to the client after {visited}")

    async def code() -> AuthorizationCodeResult:
        if "error" in landed:
            raise SystemExit(f"the issuer refused: {landed}")
        first = lambda name: landed.get(name, [None])[0]  # noqa: E731
        return AuthorizationCodeResult(code=first("code"), state=first("state"), iss=first("iss"))

    storage = Memory()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="state oauth test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browse,
        callback_handler=code,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                wrote = await session.call_tool("state_set", {"key": "users/alice/plan", "value": {"step": 1}})
                read_back = await session.call_tool("state_get", {"key": "users/alice/plan"})
                foreign = await session.call_tool("state_get", {"key": "users/bob/plan"})
    text = lambda result: result.content[0].text if result.content else ""  # noqa: E731
    print(
        json.dumps(
            {
                "signed_in": storage.tokens is not None,
                "registered": storage.client is not None and bool(storage.client.client_id),
                "scope": storage.tokens.scope if storage.tokens else None,
                "browser_path": visited,
                "set_error": wrote.is_error,
                "get": json.loads(text(read_back)) if not read_back.is_error else text(read_back),
                "foreign_error": foreign.is_error,
                "foreign": text(foreign),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
