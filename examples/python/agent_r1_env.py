"""A small client for `agent-r1 env serve` (OpenEnv's WebSocket protocol), on `websockets` only.

    async with AgentR1Env("http://127.0.0.1:8010") as env:
        result = await env.reset(seed=0, task=3)
        result = await env.step({"tool_calls": [{"name": "search", "arguments": {"query": "..."}}]})
        result = await env.step("<answer>1896</answer>")      # raw model text works too

Each result is OpenEnv's `{"observation": {...}, "reward": float | None, "done": bool}`. Server errors
raise EnvError with OpenEnv's code (VALIDATION_ERROR, CAPACITY_REACHED, ...); the session goes on.
SyncAgentR1Env wraps it for synchronous code (TRL environment classes, SkyRL envs).

Works with websockets 10 (Debian 12's python3-websockets) through 15.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, Optional, Union

try:  # websockets >= 13: the new asyncio implementation
    from websockets.asyncio.client import connect as _ws_connect

    _HEADERS_ARG = "additional_headers"
except ImportError:  # websockets 10-12
    from websockets import connect as _ws_connect  # type: ignore[no-redef]

    _HEADERS_ARG = "extra_headers"

Action = Union[str, Dict[str, Any]]


class EnvError(RuntimeError):
    """An error message from the server: `code` is OpenEnv's (WSErrorCode), `data` the rest."""

    def __init__(self, data: Dict[str, Any]):
        self.code = str(data.get("code", "UNKNOWN"))
        self.data = data
        super().__init__(f"{data.get('message', 'Unknown error')} ({self.code})")


def socket_url(url: str) -> str:
    """http(s)://host:port → ws(s)://host:port/ws (a ws(s) URL is kept; /ws appended unless present)."""
    if url.startswith("http://"):
        url = "ws://" + url[len("http://") :]
    elif url.startswith("https://"):
        url = "wss://" + url[len("https://") :]
    url = url.rstrip("/")
    return url if url.endswith("/ws") else url + "/ws"


class AgentR1Env:
    """One session (one WebSocket connection) with an environment server."""

    def __init__(self, url: str, api_key: Optional[str] = None, timeout_s: float = 60.0):
        self.url = socket_url(url)
        self.api_key = api_key
        self.timeout_s = timeout_s
        self._ws: Any = None

    async def connect(self) -> "AgentR1Env":
        if self._ws is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            kwargs = {_HEADERS_ARG: headers} if headers else {}
            self._ws = await _ws_connect(self.url, open_timeout=self.timeout_s, max_size=16 * 2**20, **kwargs)
        return self

    async def _call(self, message: Dict[str, Any], expect: str) -> Dict[str, Any]:
        await self.connect()
        await self._ws.send(json.dumps(message))
        answer = json.loads(await asyncio.wait_for(self._ws.recv(), timeout=self.timeout_s))
        if answer.get("type") == "error":
            raise EnvError(answer.get("data", {}))
        if answer.get("type") != expect:
            raise RuntimeError(f"expected a {expect} message, got {answer.get('type')!r}")
        return answer.get("data", {})

    async def reset(self, **kwargs: Any) -> Dict[str, Any]:
        """seed, task, split, sample, group, episode_id, policy, policy_version (all optional)."""
        return await self._call({"type": "reset", "data": kwargs}, "observation")

    async def step(self, action: Action) -> Dict[str, Any]:
        """Raw model text, or {"text"}, {"tool_calls": [{"name", "arguments"}]}, {"answer"}."""
        data = {"text": action} if isinstance(action, str) else action
        return await self._call({"type": "step", "data": data}, "observation")

    async def state(self) -> Dict[str, Any]:
        return await self._call({"type": "state"}, "state")

    async def close(self) -> None:
        if self._ws is not None:
            try:
                await self._ws.send(json.dumps({"type": "close"}))
            except Exception:
                pass
            await self._ws.close()
            self._ws = None

    async def __aenter__(self) -> "AgentR1Env":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class SyncAgentR1Env:
    """AgentR1Env for synchronous code: each call runs on this object's own event loop."""

    def __init__(self, url: str, api_key: Optional[str] = None, timeout_s: float = 60.0):
        self._loop = asyncio.new_event_loop()
        self._env = AgentR1Env(url, api_key=api_key, timeout_s=timeout_s)

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def reset(self, **kwargs: Any) -> Dict[str, Any]:
        return self._run(self._env.reset(**kwargs))

    def step(self, action: Action) -> Dict[str, Any]:
        return self._run(self._env.step(action))

    def state(self) -> Dict[str, Any]:
        return self._run(self._env.state())

    def close(self) -> None:
        self._run(self._env.close())
        self._loop.close()
