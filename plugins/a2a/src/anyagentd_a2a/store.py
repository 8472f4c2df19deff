"""Durable state on SQLAlchemy (SQLite through aiosqlite by default): the SDK's task store, scoped per principal,
plus this daemon's conversation table (the agent's resume token per (owner, contextId)).

Each served agent has its own task table and its own conversation table on the one database (which ones:
:mod:`.scopes`); a store object reads and writes its own table only, so nothing of one agent's is another's.

- :class:`PrincipalTaskStore` — ``DatabaseTaskStore`` whose owner is the caller's principal id; the operator reads
  every task, and a save by the operator keeps the task's owner. The durable points of a task (its first save — it
  was accepted —, INPUT_REQUIRED/AUTH_REQUIRED, a terminal state) are written before ``save`` returns; the updates
  between them (WORKING status, artifact chunks) are written behind, at most :data:`FLUSH_DELAY` later, so a turn's
  reply waits for two writes, not one per streamed event. Every read (``get``, ``list``) writes what is pending
  first: what a reader sees is what a restart finds. A task id the store handed out itself (:meth:`new_task_id`,
  the SDK's id generator) reads as absent without a query until its first save. :meth:`~PrincipalTaskStore.prune`
  deletes terminal tasks older than an age (``[a2a.retention]``, :mod:`.retention`).
- :class:`PushConfigStore` — the SDK's database push-config store that knows which tasks have configs, so the
  push sender's look-up on every task event queries only for those; one table for every agent, whose orphans
  :func:`prune_push_configs` deletes against every agent's task table.
- :func:`fail_interrupted` — at start-up, every task a process that died left open gets what
  :func:`.tasks.state.on_restart` decides: kept (a run's task), parked (waiting for input, its conversation
  resumable) or marked FAILED with the message saying why.
- :class:`ConversationTable` — resume tokens, so the next message after a restart resumes the agent's conversation
  (a conversation left without tasks is pruned with them).
- :func:`upsert` — how both write a row by its key: updated in place when it exists, never deleted first.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import anyio
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.models import TaskMixin
from a2a.server.tasks import DatabasePushNotificationConfigStore, DatabaseTaskStore
from a2a.types import (
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InternalError, InvalidParamsError
from a2a.utils.task import decode_list_tasks_cursor, encode_list_tasks_cursor
from google.protobuf.json_format import ParseDict, SerializeToJsonError
from sqlalchemy import (
    Column,
    DateTime,
    Index,
    MetaData,
    String,
    Table,
    Text,
    case,
    delete,
    exists,
    func,
    inspect,
    select,
    text,
    tuple_,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from .config import missing_sqlite_directory
from .limits import bound_history
from .members import TASK
from .principals import OPERATOR
from .sqlite_writes import BUSY_TIMEOUT, Synchronous, pragmas, twin
from .structjson import finite
from .tasks.state import FAILED, PAUSED, TERMINAL, StateError, move, name, of_name, on_restart
from .upsert import Row, upsert, upsert_rows

DURABLE_STATES = TERMINAL | PAUSED
"""States a save writes before it returns (besides a task's first save): where a task stops, or waits for an answer."""
FLUSH_DELAY = 0.25
"""Seconds an update between durable points may wait in memory before :meth:`PrincipalTaskStore.flush_behind`
writes it (env ``ANYAGENTD_A2A_FLUSH_DELAY``): what a kill -9 can lose of a running turn's streamed output."""

FRESH_IDS = 4096
"""Task ids handed out and not saved yet that the store remembers (a request that fails before its task is saved
leaves one behind; past this many the oldest are forgotten, and reading one of those costs a query)."""

PRUNE_BATCH = 500
"""Task ids one DELETE of :meth:`PrincipalTaskStore.prune` names (bound parameters: SQLite takes at most 32,766 in
a statement)."""

PUSH_TABLE = "push_notification_configs"
"""The SDK's push-config table (:class:`PushConfigStore`'s default name), pruned after the tasks
(:func:`prune_push_configs`)."""

if TYPE_CHECKING:
    from .members import Membership

log = logging.getLogger("anyagentd.a2a")


class StoreUnavailable(Exception):
    """The task store could not be opened: ``url`` (its password hidden) and ``reason``, the driver's error (the
    database unreachable or refusing us, a SQLite file that cannot be created)."""

    def __init__(self, url: str, reason: BaseException) -> None:
        detail = getattr(reason, "orig", None) or reason  # SQLAlchemy wraps the driver's own error
        super().__init__(f"cannot open the task store {url}: {detail}")
        self.url = url
        self.reason = str(detail)


def check_sqlite_directory(url: str) -> None:
    """Raise ``StoreUnavailable`` when ``url`` is a SQLite file whose directory does not exist (SQLite creates the
    file, never its directory: :func:`.config.missing_sqlite_directory`). Checked before the engine exists: a failed
    aiosqlite connect hands its worker thread a close that it delivers after the caller's event loop may have
    closed, which prints a thread's traceback."""
    directory = missing_sqlite_directory(url)
    if directory is not None:
        from sqlalchemy.engine import make_url

        raise StoreUnavailable(
            make_url(url).render_as_string(hide_password=True),
            FileNotFoundError(f"the directory {directory} does not exist"),
        )


def engine_for(url: str, synchronous: Synchronous = "normal") -> AsyncEngine:
    """An async engine on ``url``; a SQLite file gets WAL, a busy timeout and ``synchronous``
    (:func:`.sqlite_writes.pragmas`) on the connections of :mod:`.sqlite_connect` (a shutdown mid-query never leaves
    a close waiting for ever), and a twin for row writes in one hop (:func:`.sqlite_writes.twin`)."""
    if not url.startswith("sqlite"):
        return create_async_engine(url, hide_parameters=True)
    from sqlalchemy import event

    from .sqlite_connect import connect

    engine = create_async_engine(
        url, hide_parameters=True, connect_args={"timeout": BUSY_TIMEOUT, "async_creator_fn": connect}
    )
    event.listen(engine.sync_engine, "connect", pragmas(synchronous))
    twin(engine, synchronous)
    return engine


def _owner(context: ServerCallContext) -> str:
    return context.user.user_name


@dataclass
class _Live:
    """A task saved by this process that has not reached a durable state: the owner it is written for, and its
    latest version when that is not written yet."""

    context: ServerCallContext
    unwritten: Task | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class _TaskBase(DeclarativeBase):
    pass


class WideTaskModel(TaskMixin, _TaskBase):
    """The SDK's task row (``a2a.server.models.TaskMixin``, table ``tasks``) with ``context_id`` as TEXT: the SDK's
    column is ``VARCHAR(36)``, which PostgreSQL enforces, and a contextId is the client's to choose (A2A 1.0 bounds
    it nowhere). Task ids stay the SDK's: the daemon makes them (UUIDs). SQLite keeps any length either way."""

    __tablename__ = "tasks"
    context_id: Mapped[str] = mapped_column(Text, nullable=False)


LEGACY_TASKS = "tasks"
"""The task table of the one-agent daemon (the SDK's default name), kept by the agent that holds the legacy scope
(:mod:`.scopes`)."""

MAX_NAME = 63
"""The longest identifier PostgreSQL keeps (SQLAlchemy refuses a longer explicit index name)."""

_task_models: dict[str, type[TaskMixin]] = {LEGACY_TASKS: WideTaskModel}


def _bounded(name: str) -> str:
    """``name`` itself when PostgreSQL keeps it whole, else its head and a digest of all of it (still unique)."""
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[: MAX_NAME - len(digest) - 1]}_{digest}"


def task_model(table: str) -> type[TaskMixin]:
    """The task row of ``table``: :class:`WideTaskModel` for ``tasks``, else the same columns (``TaskMixin``,
    ``context_id`` TEXT) mapped on a declarative base of its own, made once per name and process (the SDK's
    ``create_task_model`` maps every table on its one shared base: a second model warns, a second one of the same
    name raises). Its indexes are named ``idx_<table>_owner`` (the SDK's (owner, last_updated)) and
    ``ix_<table>_id`` (the SDK's): SQLite's index names are one namespace for the whole file, so each table's are
    its own, and none collides with another table's name or index."""
    model = _task_models.get(table)
    if model is None:

        class _Base(DeclarativeBase):
            pass

        class _Model(TaskMixin, _Base):
            __tablename__ = table
            __table_args__ = (Index(_bounded(f"idx_{table}_owner"), "owner", "last_updated"),)
            context_id: Mapped[str] = mapped_column(Text, nullable=False)

        _Model.__name__ = _Model.__qualname__ = f"TaskModel_{table}"
        model = _task_models[table] = _Model
    return model


def updated_index(table: str) -> str:
    """The name of the index :meth:`PrincipalTaskStore.prune` reads ``table`` by (its ``last_updated``):
    ``anyagentd_tasks_last_updated`` for the legacy ``tasks``, ``idx_<table>_updated`` for another."""
    return "anyagentd_tasks_last_updated" if table == LEGACY_TASKS else _bounded(f"idx_{table}_updated")


async def widen_to_text(engine: AsyncEngine, table: str, column: str) -> None:
    """On PostgreSQL, make ``table.column`` TEXT if it is a bounded VARCHAR (a database an older daemon created);
    nothing on SQLite, whose columns keep any length. Raises what the driver raises."""
    if engine.dialect.name != "postgresql":
        return
    async with engine.begin() as conn:
        length = (
            await conn.execute(
                text(
                    "SELECT character_maximum_length FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = :table AND column_name = :column"
                ),
                {"table": table, "column": column},
            )
        ).scalar()
        if length is not None:
            await conn.execute(text(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" TYPE TEXT'))


class PrincipalTaskStore(DatabaseTaskStore):
    """Tasks owned by the principal that created them; the operator sees (and may act on) all of them. Updates
    between a task's durable points are written behind (see the module docstring); run :meth:`flush_behind` in the
    daemon's task group and :meth:`flush` before the engine is disposed. ``table`` names the task table: each
    served agent has its own (:mod:`.scopes`), and two stores on one engine never see each other's tasks."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        table: str = LEGACY_TASKS,
        flush_delay: float = FLUSH_DELAY,
        history_kept: int = 100,
    ) -> None:
        super().__init__(engine, create_table=True, owner_resolver=_owner)  # the SDK's model, replaced here:
        self.task_model = task_model(table)  # type: ignore[assignment]  # contextIds of any length (PostgreSQL)
        self.table_name = table
        """The table of this store's tasks (one per served agent, :mod:`.scopes`)."""
        self.flush_delay = flush_delay
        self.history_kept = history_kept  # messages of a task's history kept (``a2a.limits.task_history``)
        self._live: dict[str, _Live] = {}
        self._pending = anyio.Event()  # set when an update waits to be written behind
        self._fresh: OrderedDict[str, None] = OrderedDict()  # ids handed out, never saved: no row has them
        self._indexed = False  # the index :meth:`prune` reads by is created (if missing) by its first call
        self.task_ids = _FreshIds(self)
        """The SDK's task-id generator (``SimpleRequestContextBuilder(task_id_generator=…)``)."""
        self.members: Membership | None = None
        """This daemon's membership (:mod:`.members`): a task's holder row is written before its first row, so
        another daemon on the database never takes a task this one serves. ``None``: no holders written."""
        self._held: OrderedDict[str, None] = OrderedDict()  # ids whose holder row this process wrote
        self.on_saved: Callable[[Task, str], None] | None = None
        """Told every task :meth:`save` recorded (written, or held to write behind) and the owner it is saved for:
        the console's push stream (:class:`.console.events.TaskEvents`)."""

    @property
    def task_table(self) -> Table:
        """This store's task table (SQLAlchemy Core's), for the queries that join it."""
        return cast(Table, self.task_model.__table__)

    async def initialize(self) -> None:
        """Create the table if missing (the SDK's), then widen an older PostgreSQL table's ``context_id``
        (:class:`WideTaskModel`). Raises what the driver raises."""
        await super().initialize()
        await widen_to_text(self.engine, self.task_model.__tablename__, "context_id")

    def new_task_id(self) -> str:
        """A new task id (a UUID) that reads as absent, without a query, until it is saved."""
        task_id = str(uuid.uuid4())
        self._fresh[task_id] = None
        if len(self._fresh) > FRESH_IDS:
            self._fresh.popitem(last=False)
        return task_id

    async def has(self, task_id: str) -> bool:
        """Whether this store holds ``task_id`` (saved by this process or stored), whoever owns it: an id it handed
        out and never saved is absent without a query. Raises what the driver raises."""
        if task_id in self._live:
            return True
        if task_id in self._fresh:
            return False
        await self._ensure_initialized()
        async with self.engine.connect() as conn:
            found = await conn.execute(select(self.task_model.id).where(self.task_model.id == task_id))
            return found.first() is not None

    async def _owner_of(self, task_id: str) -> str | None:
        await self._ensure_initialized()
        async with self.async_session_maker() as session:
            result = await session.execute(select(self.task_model.owner).where(self.task_model.id == task_id))
            return result.scalar_one_or_none()

    async def tasks_of(self, owner: str, context_id: str) -> list[Task]:
        """Every stored task ``owner`` has in ``context_id`` (one conversation's), what is pending written first; in
        no particular order. Raises what the driver raises."""
        await self.flush()
        await self._ensure_initialized()
        model = self.task_model
        async with self.async_session_maker() as session:
            rows = (
                (await session.execute(select(model).where(model.owner == owner, model.context_id == context_id)))
                .scalars()
                .all()
            )
        return [self._from_orm(row) for row in rows]

    async def _owned(self, task_id: str, context: ServerCallContext) -> ServerCallContext:
        """The context a save is written for: the caller's, or for the operator the task's owner."""
        if _owner(context) != OPERATOR.id or task_id in self._fresh:
            return context
        live = self._live.get(task_id)
        owner = _owner(live.context) if live is not None else await self._owner_of(task_id)
        return _as_owner(context, owner) if owner is not None and owner != OPERATOR.id else context

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Record ``task``: its history first bounded to :attr:`history_kept` messages (in place: the SDK's own copy
        stops growing too; :func:`.limits.bound_history`), then written before returning when it is new to this
        process or in a durable state, else kept as the latest version to write behind."""
        bound_history(task, self.history_kept)
        context = await self._owned(task.id, context)
        self._fresh.pop(task.id, None)
        live = self._live.get(task.id)
        durable = live is None or task.status.state in DURABLE_STATES
        if live is None:
            live = self._live[task.id] = _Live(context)
        live.context = context
        live.unwritten = Task()
        live.unwritten.CopyFrom(task)  # the SDK goes on changing its object in place
        if not durable:
            self._pending.set()
        else:
            await self._write(live)
            if live.unwritten is None and task.status.state in DURABLE_STATES and self._live.get(task.id) is live:
                del self._live[task.id]  # written where it stops or waits: nothing more to hold
        if self.on_saved is not None:
            self.on_saved(task, _owner(context))

    async def _write(self, live: _Live) -> None:
        """Write ``live``'s latest unwritten version (one writer per task at a time, so the last version wins)."""
        async with live.lock:
            task, live.unwritten = live.unwritten, None
            if task is None:
                return
            try:
                await self._save_row(task, live.context)
            except BaseException:
                if live.unwritten is None:
                    live.unwritten = task  # not written: the next write takes it again
                raise

    async def _save_row(self, task: Task, context: ServerCallContext) -> None:
        """The SDK's row for ``task`` written by :func:`upsert` keyed by id: one statement on SQLite and PostgreSQL
        (the SDK's ``save`` merges through the ORM: a SELECT, then an INSERT or UPDATE). A number in a ``Struct`` that
        JSON cannot write is stored as null (:func:`.structjson.finite`, ``task`` changed), with a warning: the
        task is kept, and every later read and listing of the store still answers. Raises the SDK's
        ``InternalError`` naming the database's reason when the write fails (a lock held past the busy timeout, a
        full disk), logged with the statement."""
        await self._ensure_initialized()
        try:
            row = self._to_orm(task, _owner(context))
        except SerializeToJsonError:  # a NaN or an infinity in a Struct (an agent's event): proto3 JSON has none
            log.warning(
                "task %s holds %d number(s) JSON cannot write (NaN, infinity): stored as null", task.id, finite(task)
            )
            row = self._to_orm(task, _owner(context))
        hold = self.members is not None and task.id not in self._held
        values = {
            column.name: getattr(row, attr.key)
            for attr in inspect(self.task_model).column_attrs
            for column in attr.columns
        }
        rows: list[Row] = []
        if hold:  # in the task's first transaction, before its row: no row of a task is ever without a holder
            assert self.members is not None
            rows.append(self.members.holder_row(TASK, task.id))
        rows.append((self.task_table, ("id",), values))
        try:
            await upsert_rows(self.engine, rows)
        except DBAPIError as err:  # its text holds the SQL: the client gets the database's own reason only
            log.error("task %s not written: %s", task.id, err)
            raise InternalError(message=f"the task store did not write task {task.id}: {err.orig}") from None
        if hold:
            self._held[task.id] = None
            if len(self._held) > FRESH_IDS:
                self._held.popitem(last=False)  # forgotten: its next write records the holder again

    async def flush(self) -> None:
        """Write every update waiting to be written behind (and wait for the writes under way); a task whose write
        fails stays pending while the others are written, and the first failure is raised once all were tried."""
        failed: Exception | None = None
        for live in list(self._live.values()):
            try:
                await self._write(live)
            except Exception as err:  # noqa: BLE001 - raised below, after the other tasks' writes
                failed = failed or err
        if failed is not None:
            raise failed

    async def count_by_state(self) -> dict[int, int]:
        """How many stored tasks are in each state: ``TaskState`` value → count (states without a task absent),
        after :meth:`flush` (the states written behind count). One grouped query; a stored name ``TaskState``
        does not have is left out. Raises what the driver raises."""
        await self.flush()
        state = self.task_model.status["state"].as_string()
        async with self.engine.connect() as db:
            rows = (await db.execute(select(state, func.count()).group_by(state))).all()
        counts: dict[int, int] = {}
        for stored, count in rows:
            try:
                counts[of_name(stored)] = count
            except (StateError, TypeError):  # no state (NULL) or a name no TaskState has: nothing to count it as
                continue
        return counts

    async def flush_behind(self) -> None:
        """Until cancelled: write pending updates at most ``flush_delay`` seconds after the first of them was saved
        (a failed write is logged and tried again at the next round)."""
        while True:
            await self._pending.wait()
            await anyio.sleep(self.flush_delay)
            self._pending = anyio.Event()
            try:
                await self.flush()
            except Exception as err:  # noqa: BLE001 - the updates stay pending; the next durable save writes them
                log.warning("writing the running tasks' updates failed: %s", err)
                self._pending.set()

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        if task_id in self._fresh:
            return None
        live = self._live.get(task_id)
        if live is not None:
            await self._write(live)  # what is pending, after any write of it under way
        if _owner(context) == OPERATOR.id:
            owner = await self._owner_of(task_id)
            if owner is None:
                return None
            context = _as_owner(context, owner)
        return await super().get(task_id, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._live.pop(task_id, None)  # nothing of it is written behind any more
        await super().delete(task_id, context)

    async def prune(self, older_than: float, keep: Set[str] = frozenset()) -> int:
        """Delete every terminal task (:data:`.tasks.state.TERMINAL`) last updated more than ``older_than`` seconds
        ago, except the ids in ``keep`` (the tasks of runs that have not ended); returns how many tasks went (the
        push configs of tasks no longer stored go by :func:`prune_push_configs`, once for every agent's table). The candidates are read by ``last_updated`` (indexed here: the
        SDK indexes it only after ``owner``) and the state, :data:`PRUNE_BATCH` ids at a time in id order, and each
        batch less ``keep`` is one DELETE in its own transaction (so ``keep`` is never a statement's literal list,
        and a writer waits for one batch, not the whole prune); a task that is not terminal is never touched.
        Raises what the driver raises."""
        await self._ensure_initialized()
        model = self.task_model
        cutoff = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=older_than)
        terminal = sorted(name(state) for state in TERMINAL)
        old = (model.last_updated < cutoff) & model.status["state"].as_string().in_(terminal)
        if not self._indexed:
            async with self.engine.begin() as conn:
                # on a table of its own: one added to the SDK's shared model would go into every create_all
                table = Table(model.__tablename__, MetaData(), Column("last_updated", DateTime))
                index = Index(updated_index(model.__tablename__), table.c.last_updated)
                await conn.run_sync(lambda sync: index.create(sync, checkfirst=True))
            self._indexed = True
        gone, after = 0, ""
        while True:
            async with self.engine.begin() as conn:
                ids = (
                    (
                        await conn.execute(
                            select(model.id).where(old, model.id > after).order_by(model.id).limit(PRUNE_BATCH)
                        )
                    )
                    .scalars()
                    .all()
                )
                doomed = [task_id for task_id in ids if task_id not in keep]
                if doomed:
                    gone += (await conn.execute(delete(model).where(model.id.in_(doomed), old))).rowcount
            if len(ids) < PRUNE_BATCH:
                break
            after = ids[-1]
        return gone

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        await self.flush()
        if _owner(context) != OPERATOR.id:
            return await super().list(params, context)
        return await self._list_every_owner(params)

    async def _list_every_owner(self, params: ListTasksRequest) -> ListTasksResponse:
        """The operator's listing: the SDK's filters, order and cursor paging, without the owner condition."""
        await self._ensure_initialized()
        model = self.task_model
        stmt = select(model)
        if params.context_id:
            stmt = stmt.where(model.context_id == params.context_id)
        if params.status:
            stmt = stmt.where(model.status["state"].as_string() == TaskState.Name(params.status))
        if params.HasField("status_timestamp_after"):
            stmt = stmt.where(model.last_updated >= params.status_timestamp_after.ToDatetime())
        async with self.async_session_maker() as session:
            total = (await session.execute(select(func.count()).select_from(stmt.subquery()))).scalar_one()
            stmt = stmt.order_by(
                case((model.last_updated.is_(None), 1), else_=0).asc(), model.last_updated.desc(), model.id.desc()
            )
            if params.page_token:
                cursor = decode_list_tasks_cursor(params.page_token)
                if cursor is None:
                    raise InvalidParamsError("Invalid page token")
                stmt = stmt.where(self._after_cursor(cursor))
            size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
            rows = (await session.execute(stmt.limit(size + 1))).scalars().all()
        page = rows[:size]
        token = encode_list_tasks_cursor(self._cursor_for(page[-1])) if len(rows) == size + 1 else None
        return ListTasksResponse(
            tasks=[self._from_orm(r) for r in page], total_size=total, next_page_token=token, page_size=size
        )


class _FreshIds(IDGenerator):
    def __init__(self, store: PrincipalTaskStore) -> None:
        self.store = store

    def generate(self, context: IDGeneratorContext) -> str:
        return self.store.new_task_id()


class PushConfigStore(DatabasePushNotificationConfigStore):
    """Push-notification configs in the daemon's database. The SDK's sender looks a task's configs up for every
    event it processes (one query each, almost always finding none); this store keeps the set of task ids that
    have configs (read once, kept up to date by its own writes — the daemon is its table's only writer) and answers
    the others' look-ups with none, without a query."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self._with_configs: set[str] | None = None
        self._first_read = anyio.Lock()

    async def initialize(self) -> None:
        """Create the table if missing (the SDK's), then widen its ``task_id`` to TEXT on PostgreSQL (the SDK's is
        VARCHAR(36), which PostgreSQL enforces; an op's or another daemon's task id may be longer). Raises what the
        driver raises."""
        if self._initialized:
            return
        await super().initialize()
        await widen_to_text(self.engine, self.config_model.__tablename__, "task_id")

    def reread(self) -> None:
        """Forget the set of task ids with configs: the next look-up reads it again (another daemon on the database
        wrote configs of the tasks this one takes over, :mod:`.members`)."""
        self._with_configs = None

    async def _task_ids(self) -> set[str]:
        if self._with_configs is None:
            # one first read: concurrent first look-ups (a fresh daemon's first task ops at once) each ran the
            # SDK's table creation and all but one failed ("table push_notification_configs already exists")
            async with self._first_read:
                if self._with_configs is None:
                    await self._ensure_initialized()
                    async with self.async_session_maker() as session:
                        rows = await session.execute(select(self.config_model.task_id).distinct())
                        self._with_configs = {row[0] for row in rows}
        return self._with_configs

    async def set_info(
        self, task_id: str, notification_config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        (await self._task_ids()).add(task_id)  # before the write: a dispatch meanwhile queries, at worst for none
        return await super().set_info(task_id, notification_config, context)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        if task_id not in await self._task_ids():
            return []
        return await super().get_info_for_dispatch(task_id)

    async def delete_info(self, task_id: str, context: ServerCallContext, config_id: str | None = None) -> None:
        await super().delete_info(task_id, context, config_id)
        if not await super().get_info_for_dispatch(task_id):
            (await self._task_ids()).discard(task_id)


async def prune_push_configs(engine: AsyncEngine, task_tables: Sequence[str]) -> int:
    """Delete the push configs (:data:`PUSH_TABLE`, one table for every agent) whose task is in none of
    ``task_tables`` (every agent's task table, configured now or not: :meth:`.scopes.AgentScopes.task_tables`);
    returns how many went. A table of ``task_tables`` that does not exist holds no task; when none exists, or
    ``task_tables`` is empty, nothing is deleted (nothing says which tasks are stored). One statement in one
    transaction. Raises what the driver raises."""

    def present(sync: Any) -> tuple[bool, list[str]]:
        found = inspect(sync)
        return found.has_table(PUSH_TABLE), [name for name in task_tables if found.has_table(name)]

    async with engine.begin() as conn:
        has_push, tables = await conn.run_sync(present)
        if not has_push or not tables:
            return 0
        push = Table(PUSH_TABLE, MetaData(), Column("task_id", String(36)))
        stored = [select(Table(name, MetaData(), Column("id", String(36))).c.id) for name in tables]
        return (await conn.execute(delete(push).where(*(push.c.task_id.not_in(ids) for ids in stored)))).rowcount


class _Owner(User):
    """The call context's user, standing for a task's owner when the operator reads or writes it."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def _as_owner(context: ServerCallContext, owner: str) -> ServerCallContext:
    return context.model_copy(update={"user": _Owner(owner)})


async def open_task_ids(store: PrincipalTaskStore, among: Sequence[str] | None = None) -> list[str]:
    """The ids of ``store``'s stored tasks that are not in a terminal state (:data:`.tasks.state.TERMINAL`; a task
    with no state we know counts as open) — of ``among`` only when given, read :data:`PRUNE_BATCH` at a time: the
    work a daemon may claim (:meth:`.members.Membership.claim`). Raises what the driver raises."""
    await store._ensure_initialized()
    model = store.task_model
    state = model.status["state"].as_string()
    still_open = state.is_(None) | state.not_in(sorted(name(s) for s in TERMINAL))
    async with store.engine.connect() as conn:
        if among is None:
            return list((await conn.execute(select(model.id).where(still_open))).scalars())
        found: list[str] = []
        for start in range(0, len(among), PRUNE_BATCH):
            batch = list(among[start : start + PRUNE_BATCH])
            found += (await conn.execute(select(model.id).where(still_open, model.id.in_(batch)))).scalars()
        return found


async def fail_interrupted(
    store: PrincipalTaskStore,
    resumable: Set[tuple[str, str]] = frozenset(),
    run_tasks: Set[str] = frozenset(),
    only: Set[str] | None = None,
) -> tuple[list[TaskStatusUpdateEvent], dict[str, tuple[str, str]]]:
    """Do to every stored task — of ``only`` when given: the tasks this daemon claimed (:mod:`.members`), another
    live daemon's being its own — what :func:`.tasks.state.on_restart` decides for it (its owner kept):
    ``run_tasks`` are the ids of the tasks workflow runs run under, ``resumable`` the (owner, contextId) pairs with
    a resume token stored. A task to fail gets its decision's message as its status (the message before it moves
    to the history); one to park or keep is left as it is. Returns (the status update of every task failed, for
    its push subscribers; the parked tasks: task id → (owner, contextId))."""
    await store._ensure_initialized()
    model = store.task_model
    failed: list[TaskStatusUpdateEvent] = []
    parked: dict[str, tuple[str, str]] = {}
    if only is not None and not only:
        return failed, parked
    async with store.async_session_maker.begin() as session:
        if only is None:
            rows = list((await session.execute(select(model))).scalars().all())
        else:
            ids, rows = sorted(only), []
            for start in range(0, len(ids), PRUNE_BATCH):
                chosen = select(model).where(model.id.in_(ids[start : start + PRUNE_BATCH]))
                rows += (await session.execute(chosen)).scalars().all()
        for row in rows:
            status = dict(row.status or {})
            try:
                state = of_name(str(status.get("state")))
            except StateError:
                continue  # no state we know: nothing to decide
            decision = on_restart(
                state, run_task=row.id in run_tasks, resumable=(row.owner, row.context_id) in resumable
            )
            if decision.action == "park":
                parked[row.id] = (row.owner, row.context_id)
            if decision.action != "fail":
                continue
            history = list(row.history or [])
            if status.get("message"):
                history.append(status["message"])
            now = datetime.now(UTC)
            message = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_AGENT",
                "contextId": row.context_id,
                "taskId": row.id,
                "parts": [{"text": decision.reason}],
            }
            row.status = {
                "state": name(move(state, FAILED)),
                "message": message,
                "timestamp": now.isoformat().replace("+00:00", "Z"),
            }
            row.history = history
            row.last_updated = now.replace(tzinfo=None)
            failed.append(
                TaskStatusUpdateEvent(
                    task_id=row.id, context_id=row.context_id, status=ParseDict(row.status, TaskStatus())
                )
            )
    return failed, parked


LEGACY_CONVERSATIONS = "anyagentd_conversations"
"""The conversation table of the one-agent daemon, kept by the agent that holds the legacy scope (:mod:`.scopes`)."""


def conversation_table(name: str, metadata: MetaData | None = None) -> Table:
    """The resume-token table ``name``: one row per (owner, contextId), the agent that drives it, its token and
    when it was last written (on ``metadata``, else a new one of its own)."""
    return Table(
        name,
        MetaData() if metadata is None else metadata,
        Column("owner", String(255), primary_key=True),
        Column("context_id", Text, primary_key=True),  # the client's to choose, of any length (PostgreSQL enforces)
        Column("agent", String(255), nullable=False),
        Column("resume_token", Text, nullable=True),
        Column("updated", DateTime, nullable=False),
    )


_metadata = MetaData()
conversations_table = conversation_table(LEGACY_CONVERSATIONS, _metadata)
"""The legacy agent's table (:data:`LEGACY_CONVERSATIONS`); another agent's is :attr:`ConversationTable.table`."""


class ConversationTable:
    """Resume tokens: one row per (owner, contextId), holding the agent that drives it and its resume token. ``name``
    is the table: each served agent has its own (:mod:`.scopes`), so one agent's conversations are never
    another's."""

    def __init__(self, engine: AsyncEngine, name: str = LEGACY_CONVERSATIONS) -> None:
        self.engine = engine
        self.table = conversations_table if name == LEGACY_CONVERSATIONS else conversation_table(name)

    async def resumable(self, agent: str) -> set[tuple[str, str]]:
        """Every (owner, contextId) of ``agent`` with a resume token stored."""
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(self.table.c.owner, self.table.c.context_id).where(
                        self.table.c.agent == agent, self.table.c.resume_token.is_not(None)
                    )
                )
            ).all()
        return {(r[0], r[1]) for r in rows}

    async def initialize(self) -> None:
        """Create the table if missing; widen an older PostgreSQL table's ``context_id`` to TEXT."""
        async with self.engine.begin() as conn:
            await conn.run_sync(lambda sync: self.table.create(sync, checkfirst=True))
        await widen_to_text(self.engine, self.table.name, "context_id")

    async def resume_token(self, owner: str, context_id: str, agent: str) -> str | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(self.table.c.resume_token).where(
                        self.table.c.owner == owner,
                        self.table.c.context_id == context_id,
                        self.table.c.agent == agent,
                    )
                )
            ).first()
        return row[0] if row else None

    async def prune(
        self, older_than: float, tasks: Table, live: Set[tuple[str, str]] = frozenset()
    ) -> list[tuple[str, str]]:
        """Delete the conversations (resume-token rows) updated more than ``older_than`` seconds ago that have no
        task left in ``tasks`` (the task store's table) and are not in ``live`` (the daemon's (owner, contextId)
        in memory); returns their (owner, contextId) pairs, for their files to go too. Raises what the driver
        raises."""
        cutoff = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=older_than)
        table = self.table
        orphan = ~exists().where(tasks.c.owner == table.c.owner, tasks.c.context_id == table.c.context_id)
        async with self.engine.begin() as conn:
            rows = (
                await conn.execute(select(table.c.owner, table.c.context_id).where(table.c.updated < cutoff, orphan))
            ).all()
            gone = [(r[0], r[1]) for r in rows if (r[0], r[1]) not in live]
            for owner, context_id in gone:
                await conn.execute(delete(table).where(table.c.owner == owner, table.c.context_id == context_id))
        return gone

    async def without_tasks(self, pairs: Set[tuple[str, str]], tasks: Table) -> set[tuple[str, str]]:
        """Those of ``pairs`` ((owner, contextId)) with no task in ``tasks`` (the task store's table): one query per
        :data:`PRUNE_BATCH` pairs (a row-value IN, which SQLite and PostgreSQL both take). Raises what the driver
        raises."""
        pending = sorted(pairs)
        found: set[tuple[str, str]] = set()
        async with self.engine.connect() as conn:
            for start in range(0, len(pending), PRUNE_BATCH):
                batch = pending[start : start + PRUNE_BATCH]
                rows = await conn.execute(
                    select(tasks.c.owner, tasks.c.context_id)
                    .distinct()
                    .where(tuple_(tasks.c.owner, tasks.c.context_id).in_(batch))
                )
                found.update((r[0], r[1]) for r in rows)
        return set(pending) - found

    async def remember(self, owner: str, context_id: str, agent: str, token: str | None) -> None:
        """Store ``token`` as the resume token of (``owner``, ``context_id``), now driven by ``agent``: the one row
        of that conversation, written by :func:`upsert` (its agent, token and time replaced)."""
        now = datetime.now(UTC).replace(tzinfo=None)
        values = {"owner": owner, "context_id": context_id, "agent": agent, "resume_token": token, "updated": now}
        await upsert(self.engine, self.table, ("owner", "context_id"), values)


__all__ = [
    "FLUSH_DELAY",
    "LEGACY_CONVERSATIONS",
    "LEGACY_TASKS",
    "ConversationTable",
    "PrincipalTaskStore",
    "PushConfigStore",
    "StoreUnavailable",
    "check_sqlite_directory",
    "engine_for",
    "fail_interrupted",
    "open_task_ids",
    "prune_push_configs",
    "task_model",
    "upsert",
]
