"""Topic lifecycle, the I/O side (the decisions are ``admin``): CreateTopics,
CreatePartitions, IncrementalAlterConfigs on topics, DeleteTopics.

Owns: the names of topics being created (so that their own znode's watch event does not cost
a full reload), and deletion in two halves as Kafka's TopicDeletionManager does it: the marker
first, then brokers get a snapshot without the topic, then its znodes go (the loop finishes a
deletion a failed-over controller found pending). A new topic's partition states are created
with the topic, in its one transaction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from odradek.cluster.model import TopicMetadata
from odradek.errors import ErrorCode, KafkaError

from . import admin
from .context import ControllerContext

log = logging.getLogger(__name__)


class TopicLifecycle:
    def __init__(self, ctx: ControllerContext) -> None:
        self._ctx = ctx
        self.creating: set[str] = set()  # topics being written by ``create``

    async def create(self, req: admin.CreateTopic) -> TopicMetadata:
        ctx = self._ctx
        async with ctx.acting() as (record, snapshot):
            plan = admin.plan_create(req, snapshot, ctx.settings.config, record.epoch)
            metadata = TopicMetadata(plan.name, plan.topic_id,
                                     tuple(plan.states[p] for p in sorted(plan.states)), plan.configs)
            if req.validate_only:
                return metadata
            self.creating.add(plan.name)  # its znode's watch event may come before the cache has it
            try:
                if not await ctx.write(ctx.store.create_topic, plan.name, plan.topic_id, plan.states, plan.configs):
                    await ctx.reload_after_write()
                    raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{req.name}' already exists.")
            finally:
                self.creating.discard(plan.name)
            log.info("created topic %s (%s) with %d partitions", plan.name, plan.topic_id, len(plan.states))
            ctx.snapshot = admin.with_created(ctx.snapshot, plan)  # no reload of every topic
            ctx.publish()
            return metadata

    async def create_partitions(self, name: str, count: int, validate_only: bool) -> TopicMetadata:
        ctx = self._ctx
        async with ctx.acting() as (record, snapshot):
            topic, new_states = admin.plan_partitions(snapshot, name, count, record.epoch)
            if validate_only:
                return TopicMetadata(name, topic.topic_id, tuple(topic.states[p] for p in sorted(topic.states))
                                     + tuple(new_states[p] for p in sorted(new_states)), dict(topic.configs))
            if not await ctx.write(ctx.store.add_partitions, topic, new_states):
                await ctx.reload_after_write()
                raise KafkaError(ErrorCode.invalid_partitions,
                                 f"Topic {name} changed while adding partitions; retry.")
            log.info("topic %s now has %d partitions", name, count)
            return (await ctx.reload_after_write()).topics[name].metadata()

    async def alter_configs(self, name: str, set_: dict, delete: list[str], validate_only: bool) -> dict:
        ctx = self._ctx
        async with ctx.acting() as (_, snapshot):
            topic, configs = admin.plan_configs(snapshot, name, set_, delete)
            if validate_only:
                return configs
            if not await ctx.write(ctx.store.set_topic_configs, topic, configs):
                await ctx.reload_after_write()
                raise KafkaError(ErrorCode.invalid_config, f"Configs of topic {name} changed meanwhile; retry.")
            log.info("topic %s configs now %s", name, configs)
            await ctx.reload_after_write()
            ctx.poke()  # e.g. unclean.leader.election.enable=true elects offline partitions
            return configs

    async def delete(self, name: str) -> None:
        ctx = self._ctx
        async with ctx.acting() as (_, snapshot):
            admin.check_deletable(snapshot, name)
            await ctx.write(ctx.store.mark_for_deletion, name)
            ctx.snapshot = dataclasses.replace(snapshot, pending_deletions=snapshot.pending_deletions | {name})
            await ctx.guarded(self.finish_deletion(name))

    async def finish_deletion(self, topic: str) -> None:
        """Deletion's second half: brokers get a snapshot without the topic, then znodes go.
        Holds the lock; store failures are raised."""
        ctx = self._ctx
        log.info("deleting topic %s: pushing a snapshot without it", topic)
        ctx.publish_now()
        if not await ctx.pusher.wait_delivered(ctx.settings.config.deletion_push_timeout_s):
            log.info("deleting topic %s: not every broker answered; they drop it on their next push", topic)
        await asyncio.to_thread(ctx.store.delete_topic, topic)
        snapshot = ctx.snapshot
        ctx.snapshot = dataclasses.replace(
            snapshot, topics={n: t for n, t in snapshot.topics.items() if n != topic},
            pending_deletions=snapshot.pending_deletions - {topic})
        log.info("deleted topic %s", topic)
