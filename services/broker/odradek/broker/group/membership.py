"""The classic group membership protocol: Kafka's GroupCoordinator state machine.

``Membership`` owns the groups of the partitions this coordinator has loaded and answers
JoinGroup, SyncGroup, Heartbeat and LeaveGroup. It knows nothing about sockets or wire
versions: JoinGroup/SyncGroup answers that must wait (for the other members, for the
leader's assignment) are futures resolved by the state machine; timers (session expiry,
delayed joins) go through an injected ``call_later`` (the event loop, or a fake clock in
tests); persistence of a group's metadata goes through an injected coroutine
``store_group(group, assignments)``.

The rules are Kafka's: MEMBER_ID_REQUIRED for JoinGroup v4+; the first rebalance of an empty
group waits ``group.initial.rebalance.delay.ms`` and extends by that delay while members keep
arriving, up to the rebalance timeout; later rebalances complete as soon as every member has
rejoined, or at the rebalance timeout (the largest of the members'), dropping members that
did not rejoin; protocol by vote; a static member (group.instance.id) that rejoins with
unchanged protocols replaces its old member id without a rebalance.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Awaitable, Callable

from odradek.broker.group.model import Group, GroupState, JoinResult, Member, Protocols, SyncResult
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

S = GroupState
E = ErrorCode
StoreGroup = Callable[[Group, dict[str, bytes]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    initial_rebalance_delay_ms: int = 3000      # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000          # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000     # group.max.session.timeout.ms
    new_member_join_timeout_ms: int = 300_000   # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs

    def session_timeout_ok(self, session_timeout_ms: int) -> bool:
        """Within the broker's range (else a JoinGroup is INVALID_SESSION_TIMEOUT)."""
        return self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms


def _ms() -> int:
    return int(time.time() * 1000)


def _resolve(future: asyncio.Future | None, result) -> None:
    if future is not None and not future.done():
        future.set_result(result)


class Membership:
    def __init__(self, config: MembershipConfig, store_group: StoreGroup,
                 call_later: Callable | None = None, now_ms: Callable[[], int] = _ms) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self._store_group = store_group
        self._call_later = call_later
        self._now = now_ms
        self._tasks: set[asyncio.Task] = set()

    def _later(self, delay_ms: int, fn, *args):
        call_later = self._call_later or asyncio.get_running_loop().call_later
        return call_later(max(delay_ms, 0) / 1000, fn, *args)

    @staticmethod
    def _future() -> asyncio.Future:
        return asyncio.get_running_loop().create_future()

    # -- JoinGroup -----------------------------------------------------------------------------
    async def join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str,
                   client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                   protocol_type: str, protocols: Protocols, require_known_member_id: bool,
                   skip_assignment: bool = False) -> JoinResult:
        """``skip_assignment``: the client reads JoinGroup v9's SkipAssignment (KIP-814)."""
        if not self.config.session_timeout_ok(session_timeout_ms):
            return JoinResult(E.invalid_session_timeout, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(E.unknown_member_id, member_id)
            group = self.groups[group_id] = Group(group_id, state_ms=self._now())
        if group.state == S.DEAD:
            return JoinResult(E.coordinator_not_available, member_id)
        if not group.supports(protocol_type, protocols):
            return JoinResult(E.inconsistent_group_protocol, member_id)
        args = (instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                protocol_type, protocols)
        if not member_id:
            outcome = self._join_new(group, require_known_member_id, skip_assignment, *args)
        else:
            outcome = self._join_known(group, member_id, *args)
        if isinstance(outcome, JoinResult):
            return outcome
        return await asyncio.shield(outcome)

    def _join_new(self, group: Group, require_known: bool, skip_assignment: bool, instance_id, client_id, *rest):
        member_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id:
            old = group.static.get(instance_id)
            if old is not None and old in group.members:
                return self._replace_static(group, group.members[old], member_id, rest[-1], skip_assignment)
            return self._add_and_rebalance(group, member_id, instance_id, client_id, *rest)
        if require_known:
            session_ms = rest[1]
            group.pending[member_id] = self._later(session_ms, self._expire_pending, group, member_id)
            return JoinResult(E.member_id_required, member_id)
        return self._add_and_rebalance(group, member_id, instance_id, client_id, *rest)

    def _join_known(self, group: Group, member_id: str, instance_id, client_id, client_host,
                    session_ms, rebalance_ms, protocol_type, protocols):
        if member_id in group.pending:
            group.pending.pop(member_id).cancel()
            return self._add_and_rebalance(group, member_id, instance_id, client_id, client_host,
                                           session_ms, rebalance_ms, protocol_type, protocols)
        if group.is_fenced(member_id, instance_id):
            return JoinResult(E.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None or group.state in (S.EMPTY, S.DEAD):
            return JoinResult(E.unknown_member_id, member_id)
        unchanged = member.protocols == protocols
        if group.state == S.PREPARING_REBALANCE or (
                group.state == S.COMPLETING_REBALANCE and not unchanged) or (
                group.state == S.STABLE and (member_id == group.leader_id or not unchanged)):
            return self._update_and_rebalance(group, member, session_ms, rebalance_ms, protocols)
        return self._current_generation(group, member)  # nothing changed: answer at once

    def _current_generation(self, group: Group, member: Member, *, members: bool = True) -> JoinResult:
        listed = ()
        if members and member.member_id == group.leader_id:
            listed = tuple((m.member_id, m.instance_id, m.metadata(group.protocol_name))
                           for m in group.members.values())
        return JoinResult(E.none, member.member_id, group.generation, group.protocol_type,
                          group.protocol_name, group.leader_id or "", listed)

    def _add_and_rebalance(self, group: Group, member_id, instance_id, client_id, client_host,
                           session_ms, rebalance_ms, protocol_type, protocols) -> asyncio.Future:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                        protocol_type, protocols, is_new=True, joined_ms=self._now(),
                        join_future=self._future())
        group.add(member)
        if group.state == S.PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True
        self._schedule_expiry(group, member)
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined")
        return member.join_future

    def _update_and_rebalance(self, group: Group, member: Member, session_ms, rebalance_ms,
                              protocols) -> asyncio.Future:
        member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = protocols, session_ms, rebalance_ms
        if not member.awaiting_join:
            member.join_future = self._future()
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        return member.join_future

    def _replace_static(self, group: Group, old: Member, new_id: str, protocols: Protocols, skip_assignment: bool):
        """KIP-345: the instance id's member gets a new member id; the old one is fenced. In a
        Stable group with its protocols unchanged nothing rebalances: the leader is told it leads
        with SkipAssignment (KIP-814, JoinGroup v9+); before v9 it is answered the old leader id,
        so that it runs no assignment a Stable group would not hand out (Kafka's answers)."""
        old_id, leader = old.member_id, group.leader_id
        _resolve(old.join_future, JoinResult(E.fenced_instance_id, old_id))
        _resolve(old.sync_future, SyncResult(E.fenced_instance_id))
        del group.members[old_id]
        old.member_id, old.join_future, old.sync_future = new_id, None, None
        group.members[new_id] = old
        group.static[old.instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        self._schedule_expiry(group, old)
        log.info("group %s: static member %s replaced member id %s by %s", group.group_id,
                 old.instance_id, old_id, new_id)
        if group.state == S.STABLE and old.protocols == protocols and \
                group.protocol_name in {n for n, _ in protocols}:
            if skip_assignment:
                result = self._current_generation(group, old)
                return dataclasses.replace(result, skip_assignment=new_id == group.leader_id)
            return dataclasses.replace(self._current_generation(group, old, members=False), leader=leader or "")
        return self._update_and_rebalance(group, old, old.session_timeout_ms, old.rebalance_timeout_ms, protocols)

    # -- rebalances ----------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group, reason)
        elif group.state == S.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == S.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                _resolve(m.sync_future, SyncResult(E.rebalance_in_progress))
        was_empty = group.state == S.EMPTY
        group.transition(S.PREPARING_REBALANCE, self._now())
        self._cancel_join_timer(group)
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id, group.generation, reason)
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay = True
            group.join_timer = self._later(delay, self._initial_join_expired, group, delay,
                                           max(group.rebalance_timeout_ms() - delay, 0))
        else:
            group.join_timer = self._later(group.rebalance_timeout_ms(), self._complete_join, group)
            self._try_complete_join(group)

    def _initial_join_expired(self, group: Group, delay: int, remaining: int) -> None:
        if group.state != S.PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            group.join_timer = self._later(step, self._initial_join_expired, group, delay, max(remaining - delay, 0))
            return
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.state == S.PREPARING_REBALANCE and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _cancel_join_timer(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    def _complete_join(self, group: Group) -> None:
        self._cancel_join_timer(group)
        group.initial_delay = False
        group.new_member_added = False
        if group.state != S.PREPARING_REBALANCE:
            return
        for m in [m for m in group.members.values() if not m.awaiting_join and not m.instance_id]:
            log.info("group %s: member %s did not rejoin in time; removing it", group.group_id, m.member_id)
            self._drop(group, m, E.unknown_member_id)
        joined = [m for m in group.members.values() if m.awaiting_join]
        if group.members and not joined:
            # only static members that have not rejoined: wait for them or their session expiry
            group.join_timer = self._later(group.rebalance_timeout_ms(), self._complete_join, group)
            return
        if group.leader_id not in {m.member_id for m in joined} and joined:
            group.leader_id = joined[0].member_id
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(S.EMPTY, self._now())
            log.info("group %s: generation %d is empty", group.group_id, group.generation)
            self._spawn(self._store_group(group, {}))
            return
        group.protocol_name = group.select_protocol()
        group.transition(S.COMPLETING_REBALANCE, self._now())
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", group.group_id,
                 group.generation, len(group.members), group.protocol_name, group.leader_id)
        for m in joined:
            result = self._current_generation(group, m)
            m.is_new = False
            _resolve(m.join_future, result)
            self._schedule_expiry(group, m)

    # -- SyncGroup -----------------------------------------------------------------------------
    async def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        group = self.groups.get(group_id)
        error = self.check_member(group, member_id, instance_id, generation)
        if error != E.none:
            return SyncResult(error)
        member = group.members[member_id]
        if (protocol_type and protocol_type != group.protocol_type) or (
                protocol_name and protocol_name != group.protocol_name):
            return SyncResult(E.inconsistent_group_protocol)
        if group.state == S.PREPARING_REBALANCE:
            return SyncResult(E.rebalance_in_progress)
        self._schedule_expiry(group, member)
        if group.state == S.STABLE:
            return SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment)
        if not member.awaiting_sync:
            member.sync_future = self._future()
        future = member.sync_future
        if member_id == group.leader_id:
            await self._apply_leader_assignment(group, assignments)
        return await asyncio.shield(future)

    async def _apply_leader_assignment(self, group: Group, assignments: dict[str, bytes]) -> None:
        generation = group.generation
        full = {mid: assignments.get(mid, b"") for mid in group.members}
        try:
            await self._store_group(group, full)
            error = E.none
        except KafkaError as e:
            error = e.code
        if group.state != S.COMPLETING_REBALANCE or group.generation != generation:
            return  # a rebalance started meanwhile; the members were told
        if error != E.none:
            log.warning("group %s: storing generation %d failed (%s); rebalancing", group.group_id,
                        generation, error.name)
            for m in group.members.values():
                _resolve(m.sync_future, SyncResult(error))
            self._prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for mid, m in group.members.items():
            m.assignment = full.get(mid, b"")
            _resolve(m.sync_future, SyncResult(E.none, group.protocol_type, group.protocol_name, m.assignment))
        group.transition(S.STABLE, self._now())
        log.info("group %s: generation %d is stable", group.group_id, generation)

    # -- Heartbeat, LeaveGroup -----------------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        group = self.groups.get(group_id)
        error = self.check_member(group, member_id, instance_id, generation)
        if error != E.none:
            return error
        self._schedule_expiry(group, group.members[member_id])
        return E.rebalance_in_progress if group.state == S.PREPARING_REBALANCE else E.none

    @staticmethod
    def check_member(group: Group | None, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        """Kafka's checks of a request from a member of a generation (SyncGroup, Heartbeat,
        OffsetCommit): the group is alive, the static member not fenced, the member known,
        the generation current."""
        if group is None:
            return E.unknown_member_id
        if group.state == S.DEAD:
            return E.coordinator_not_available
        if group.is_fenced(member_id, instance_id):
            return E.fenced_instance_id
        if member_id not in group.members:
            return E.unknown_member_id
        if generation != group.generation:
            return E.illegal_generation
        return E.none

    def touch(self, group: Group, member_id: str) -> None:
        """A sign of life from a member (a commit): restart its session timer."""
        self._schedule_expiry(group, group.members[member_id])

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """One error per (member id, instance id) leaving."""
        group = self.groups.get(group_id)
        if group is None:
            return [E.unknown_member_id] * len(members)
        if group.state == S.DEAD:
            return [E.coordinator_not_available] * len(members)
        return [self._leave_one(group, member_id, instance_id) for member_id, instance_id in members]

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id:
            mapped = group.static.get(instance_id)
            if mapped is None:
                return E.unknown_member_id
            if member_id and mapped != member_id:
                return E.fenced_instance_id
            member_id = mapped
        if member_id in group.pending:
            group.pending.pop(member_id).cancel()
            self._try_complete_join(group)
            return E.none
        member = group.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        log.info("group %s: member %s left", group.group_id, member_id)
        self._remove_and_update(group, member, "member left the group")
        return E.none

    # -- expiry ----------------------------------------------------------------------------------
    def _schedule_expiry(self, group: Group, member: Member) -> None:
        if member.timer is not None:
            member.timer.cancel()
        member.timer = self._later(member.session_timeout_ms, self._expire, group, member)

    def _expire(self, group: Group, member: Member) -> None:
        member.timer = None
        if group.members.get(member.member_id) is not member:
            return
        now = self._now()
        keep = member.awaiting_sync or (member.awaiting_join and (
            not member.is_new or now - member.joined_ms < self.config.new_member_join_timeout_ms))
        if keep:  # Kafka keeps members that wait on the coordinator alive
            self._schedule_expiry(group, member)
            return
        log.info("group %s: member %s expired (no heartbeat within %d ms)", group.group_id,
                 member.member_id, member.session_timeout_ms)
        self._remove_and_update(group, member, f"member {member.member_id} expired")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self._try_complete_join(group)

    def _drop(self, group: Group, member: Member, error: ErrorCode) -> None:
        group.remove(member.member_id)
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None
        _resolve(member.join_future, JoinResult(error, member.member_id))
        _resolve(member.sync_future, SyncResult(error))

    def _remove_and_update(self, group: Group, member: Member, reason: str) -> None:
        self._drop(group, member, E.unknown_member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state == S.PREPARING_REBALANCE:
            self._try_complete_join(group)

    # -- group lifecycle ---------------------------------------------------------------------
    def unload(self, group_id: str, error: ErrorCode = E.not_coordinator) -> Group | None:
        """Forget a group (coordinator moved, group deleted): waiters get ``error``."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return None
        self._drop_all(group, error)
        group.transition(S.DEAD, self._now())
        return group

    def _drop_all(self, group: Group, error: ErrorCode) -> None:
        """Stop the group's timers and answer every waiting member ``error``."""
        self._cancel_join_timer(group)
        for handle in group.pending.values():
            handle.cancel()
        group.pending.clear()
        for m in list(group.members.values()):
            self._drop(group, m, error)

    def hand_over(self, group_id: str) -> None:
        """The group became a consumer group (KIP-848's online upgrade): members waiting on a
        JoinGroup or SyncGroup answer are told REBALANCE_IN_PROGRESS (they rejoin the consumer
        group), timers stop, and a member-less Empty group keeps the offsets."""
        group = self.groups[group_id]
        self._drop_all(group, E.rebalance_in_progress)
        group.protocol_name = group.leader_id = None
        group.transition(S.EMPTY, self._now())

    def adopt(self, group: Group, reason: str | None) -> None:
        """A consumer group turned classic (KIP-848's online downgrade): its members get session
        timers and, with a ``reason``, rejoin in a rebalance, as Kafka starts one."""
        self.install(group)
        if reason is not None:
            self._prepare_rebalance(group, reason)

    def install(self, group: Group) -> None:
        """A group loaded from ``__consumer_offsets``: members get fresh session timers."""
        self.groups[group.group_id] = group
        for m in group.members.values():
            self._schedule_expiry(group, m)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("storing group metadata failed: %s", task.exception())
