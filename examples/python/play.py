"""Plays episodes against `agent-r1 env serve` with a scripted policy (no model needed).

    agent-r1 env serve --scenario multihop-qa &
    /usr/bin/python3 examples/python/play.py --url http://127.0.0.1:8010 --episodes 4

Each episode: reset(seed, task=i); one structured tool call built from the first tool's schema (the
question as its text argument); then a raw-text answer guessed from what came back. The policy is
deliberately naive: the point is the protocol. Every episode is recorded by the server; check them
with `agent-r1 replay runs/env-multihop-qa/episodes.jsonl`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import Any, Dict

from agent_r1_env import AgentR1Env, EnvError


def first_call(question: str, tools: list) -> Dict[str, Any]:
    """A call of the first tool, its string parameters filled with the question."""
    fn = tools[0]["function"]
    params = fn.get("parameters", {})
    args = {}
    for name in params.get("required", []):
        spec = params.get("properties", {}).get(name, {})
        if spec.get("type") == "string":
            args[name] = question[: spec.get("maxLength", len(question))]
    return {"tool_calls": [{"name": fn["name"], "arguments": args}]}


def guess(question: str, seen: str) -> str:
    """A year for when-questions, else the first number, else the first capitalised words seen."""
    if re.match(r"(?i)\s*(when|in what year)", question):
        years = re.findall(r"\b1\d{3}\b|\b20\d{2}\b", seen)
        if years:
            return years[0]
    numbers = re.findall(r"-?\d+(?:\.\d+)?", seen)
    if numbers:
        return numbers[0]
    names = re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)*", seen)
    return names[0] if names else "unknown"


async def play(url: str, episodes: int, seed: int, api_key: str | None) -> Dict[str, Any]:
    results = []
    async with AgentR1Env(url, api_key=api_key) as env:
        for i in range(episodes):
            result = await env.reset(seed=seed, task=i, policy="python-scripted", policy_version="1")
            obs = result["observation"]
            question = obs["text"]
            result = await env.step(first_call(question, obs["tools"]))
            if not result["done"]:
                seen = result["observation"]["text"] or ""
                result = await env.step(f"<answer>{guess(question, seen)}</answer>")
            obs = result["observation"]
            # A step after the end is refused with OpenEnv's EXECUTION_ERROR; the session goes on.
            try:
                await env.step({"answer": "again"})
                raise AssertionError("a step after done was accepted")
            except EnvError as err:
                assert err.code == "EXECUTION_ERROR", err
            state = await env.state()
            results.append(
                {
                    "episode_id": obs["episode_id"],
                    "turns": obs["turn"],
                    "end_reason": obs.get("end_reason"),
                    "reward": obs.get("total_reward"),
                    "success": obs.get("outcome", {}).get("success"),
                    "metrics": obs.get("outcome", {}).get("metrics", {}),
                    "steps": state["step_count"],
                }
            )
            print(
                f"episode {obs['episode_id']}: {obs['turn']} turns, ended {obs.get('end_reason')}, "
                f"reward {obs.get('total_reward')}",
                file=sys.stderr,
            )
    return {
        "episodes": len(results),
        "done": sum(1 for r in results if r["end_reason"] is not None),
        "success": sum(1 for r in results if r["success"]),
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8010")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    args = parser.parse_args()
    summary = asyncio.run(play(args.url, args.episodes, args.seed, args.api_key))
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{summary['episodes']} episodes, {summary['success']} solved")


if __name__ == "__main__":
    main()
