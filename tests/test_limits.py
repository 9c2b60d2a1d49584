"""The rules of the per-principal limits (``smriti.mcp_server.limits``) on a clock the
test moves: which session is closed to make room, when a new one is refused, idle
expiry, and the token bucket. The HTTP server applying them is tested end to end in
``test_http_limits.py``."""

from __future__ import annotations

import pytest

from smriti.config import Settings
from smriti.errors import ConfigError
from smriti.mcp_server.limits import HttpLimits, RateLimiter, SessionLimits


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def open_one(limits: SessionLimits, sid: str, user: str, key: str) -> list[str]:
    decision = limits.admit(user, key)
    assert not decision.refused, decision.reason
    limits.opened(sid, user, key, owner=None)
    return [s.id for s in decision.evict]


def test_the_oldest_idle_session_of_the_key_makes_room() -> None:
    clock = Clock()
    limits = SessionLimits(per_user=10, per_credential=2, idle_seconds=600, clock=clock)
    for sid in ("a", "b"):
        clock.now += 1
        assert open_one(limits, sid, "alice", "key:1") == []
    busy = limits.begin("a")  # the older one is in use: the next oldest idle goes
    assert open_one(limits, "c", "alice", "key:1") == ["b"]
    assert open_one(limits, "x", "bob", "key:2") == []  # another user is untouched
    assert busy is not None
    limits.end(busy, gone=False)
    assert open_one(limits, "d", "alice", "key:1") == ["a"]
    assert sorted(limits.sessions) == ["c", "d", "x"]


def test_a_new_session_is_refused_when_every_one_is_busy() -> None:
    limits = SessionLimits(per_user=10, per_credential=1, idle_seconds=600, clock=Clock())
    open_one(limits, "a", "alice", "key:1")
    limits.begin("a")
    refused = limits.admit("alice", "key:1")
    assert refused.refused and refused.retry_after > 0
    assert "credential key:1" in refused.reason
    assert not limits.admit("bob", "key:2").refused


def test_sessions_being_opened_count_against_the_cap() -> None:
    limits = SessionLimits(per_user=2, per_credential=2, idle_seconds=600, clock=Clock())
    assert not limits.admit("alice", "key:1").refused
    assert not limits.admit("alice", "key:1").refused
    assert limits.admit("alice", "key:1").refused  # two openings under way, none idle
    limits.abandoned("alice", "key:1")
    assert not limits.admit("alice", "key:1").refused


def test_the_user_cap_spans_the_users_keys() -> None:
    clock = Clock()
    limits = SessionLimits(per_user=3, per_credential=3, idle_seconds=600, clock=clock)
    for sid, key in (("a", "key:1"), ("b", "key:1"), ("c", "key:2")):
        clock.now += 1
        open_one(limits, sid, "alice", key)
    assert open_one(limits, "d", "alice", "key:2") == ["a"]  # the user's oldest


def test_idle_sessions_expire_and_free_their_room() -> None:
    clock = Clock()
    limits = SessionLimits(per_user=1, per_credential=1, idle_seconds=60, clock=clock)
    open_one(limits, "a", "alice", "key:1")
    clock.now += 61
    assert limits.count("alice") == 0
    assert open_one(limits, "b", "alice", "key:1") == []


def test_the_token_bucket() -> None:
    clock = Clock()
    bucket = RateLimiter(per_minute=60, burst=3, clock=clock)
    assert [bucket.take("alice", 1) for _ in range(3)] == [0, 0, 0]
    assert bucket.take("alice", 1) == 1  # one token a second
    assert bucket.take("bob", 1) == 0  # per user
    clock.now += 2
    assert bucket.take("alice", 2) == 0
    assert bucket.take("alice", 5) >= 1  # more than the burst: only on a full bucket
    clock.now += 3
    assert bucket.take("alice", 5) == 0


def test_the_rate_limit_is_off_on_loopback_unless_set() -> None:
    auto = Settings.from_env({})
    assert HttpLimits.from_settings(auto, loopback=True).rate_limiter() is None
    assert HttpLimits.from_settings(auto, loopback=False).rate_per_minute == 600
    chosen = Settings.from_env({"SMRITI_RATE_LIMIT": "30"})
    assert HttpLimits.from_settings(chosen, loopback=True).rate_per_minute == 30
    off = Settings.from_env({"SMRITI_RATE_LIMIT": "off"})
    assert HttpLimits.from_settings(off, loopback=False).rate_limiter() is None
    with pytest.raises(ConfigError, match="SMRITI_RATE_LIMIT"):
        Settings.from_env({"SMRITI_RATE_LIMIT": "fast"})
