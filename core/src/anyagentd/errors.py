"""Typed errors, one class per ``ErrorBody`` kind of the wire schema.

An :class:`AnyagentError` carries ``kind`` (its class name), a human ``message`` and the variant's own fields;
:meth:`AnyagentError.body` renders the wire's ``ErrorBody`` object (``{"kind", "message", ...fields}``) and
:func:`error_from_body` turns one back into the matching exception, keeping unknown fields.
Kinds and fields come from ``docs/wire.md#error-kinds`` (ErrorBody kinds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .model import LoginMethod


class AnyagentError(Exception):
    """Base of every error the engine, the runtime and the wire report.

    Takes: ``message`` (human text) and the variant's fields as keyword arguments, all JSON-serializable.
    """

    kind: ClassVar[str] = "Error"
    registry: ClassVar[dict[str, type[AnyagentError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__
        AnyagentError.registry[cls.kind] = cls

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def __getattr__(self, name: str) -> Any:
        """A field's value (arbitrary JSON, as the variant's fields are)."""
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(name)

    wire_kind: ClassVar[str | None] = None
    """The ``kind`` :meth:`body` writes when it is not the class name (a Python-level error the wire never sends
    is written as the wire kind its clients know)."""

    def body(self) -> dict[str, Any]:
        """The wire ``ErrorBody``: ``{"kind": ..., "message": ..., **fields}``."""
        return {"kind": self.wire_kind or self.kind, "message": self.message, **self.fields}

    def __repr__(self) -> str:
        return f"{self.kind}({self.message!r}, {self.fields!r})"


class NotInstalled(AnyagentError):
    """The agent is not installed (or not in the last discovery). Fields: ``agent``."""

    def __init__(self, agent: str, message: str | None = None) -> None:
        super().__init__(message or f"agent {agent!r} is not installed", agent=agent)


class SpawnFailed(AnyagentError):
    """The agent process could not be started. Fields: ``detail``."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"could not start the agent: {detail}", detail=detail)


class AuthRequired(AnyagentError):
    """The agent needs a login. Fields: ``login`` (``LoginMethod``s; JSON objects on the wire)."""

    def __init__(self, login: list[LoginMethod] | None = None, message: str = "agent needs login") -> None:
        super().__init__(message, login=list(login or []))


class HandshakeTimeout(AnyagentError):
    """The agent did not complete its handshake in time (30 s by default)."""

    def __init__(self, message: str = "the agent did not complete its handshake in time") -> None:
        super().__init__(message)


class _Detailed(AnyagentError):
    def __init__(self, detail: str, message: str | None = None) -> None:
        super().__init__(message or detail, detail=detail)


class UnsupportedFeature(_Detailed):
    """The agent or this installation cannot do what was asked. Fields: ``detail``."""


class InvalidConfiguration(_Detailed):
    """An option, value or configuration is not acceptable. Fields: ``detail``."""


class InvalidRequest(_Detailed):
    """The command does not fit the session's state (unknown request, double answer…). Fields: ``detail``."""


class ResumeFailed(_Detailed):
    """Resume or fork could not be honoured. Fields: ``detail`` (the agent's own words), and ``reason``
    :data:`NOT_SAVED` when the agent has no saved session under the token at all: it was never persisted (the
    agent process died before it wrote it, e.g. killed right after its first prompt) or it was deleted. Nothing can
    resume it; a client opens a fresh session and, to carry on, gives it again what the lost one was told.
    (``docs/wire.md#error-kinds``.)"""

    NOT_SAVED: ClassVar[str] = "not_saved"
    """``reason`` of a resume whose token names no saved session."""

    def __init__(self, detail: str, message: str | None = None, *, reason: str | None = None) -> None:
        super().__init__(detail, message)
        if reason is not None:
            self.fields["reason"] = reason

    @classmethod
    def not_saved(cls, token: str, detail: str, agent: str = "the agent") -> ResumeFailed:
        """The error for a resume of ``token`` that ``agent`` reports (in ``detail``) as naming no saved session."""
        return cls(
            detail,
            f"{agent} has no saved session {token}: it was never saved (the agent stopped before "
            "writing it) or was removed, so it cannot be resumed; open a fresh session",
            reason=cls.NOT_SAVED,
        )

    @property
    def never_saved(self) -> bool:
        """Whether ``reason`` is :data:`NOT_SAVED` (also for an error rebuilt by :func:`error_from_body`)."""
        return self.fields.get("reason") == self.NOT_SAVED


class ProtocolFailed(_Detailed):
    """The agent broke its protocol, or ``generate`` could not produce plain text. Fields: ``detail``."""


class BadFrame(_Detailed):
    """A wire input line that is not a valid command frame. Fields: ``detail``."""


class ConsumerLagged(_Detailed):
    """The session's consumer left more events undrained than the bound; the session was closed."""


class SessionBusy(AnyagentError):
    """The session is running a turn and the command needs it idle."""

    def __init__(self, message: str = "the session is busy with a turn") -> None:
        super().__init__(message)


class SessionClosed(AnyagentError):
    """The session is closed; commands on it are refused."""

    def __init__(self, message: str = "the session is closed") -> None:
        super().__init__(message)


class Draining(SessionClosed):
    """The runtime is draining (``Runtime.drain``): it opens no session and takes no prompt any more. A Python-level
    refusal the JSON-lines wire never sends; its body is a ``SessionClosed`` (the wire's kind for a command refused
    because things are shutting down) with ``reason: "draining"``. Fields: ``reason``."""

    wire_kind = "SessionClosed"

    def __init__(self, message: str = "the runtime is draining: no new sessions or prompts") -> None:
        super().__init__(message)
        self.fields["reason"] = "draining"


class UnknownSession(AnyagentError):
    """No session with this id was ever opened on this connection. Fields: ``session``."""

    def __init__(self, session: str) -> None:
        super().__init__(f"unknown session {session!r}", session=session)


class ProcessExited(AnyagentError):
    """The agent process exited. Fields: ``status`` (``"exit status: 3"``, ``"signal: 9 (SIGKILL)"``),
    ``stderr`` (the last lines it wrote)."""

    def __init__(self, status: str, stderr: str = "", message: str | None = None) -> None:
        super().__init__(message or f"the agent exited ({status})", status=status, stderr=stderr)


def error_from_body(body: dict[str, Any]) -> AnyagentError:
    """Rebuild the exception for an ``ErrorBody`` (decoded JSON); unknown kinds give a plain :class:`AnyagentError`."""
    body = dict(body)
    kind = str(body.pop("kind", "Error"))
    message = str(body.pop("message", ""))
    cls = AnyagentError.registry.get(kind)
    err = AnyagentError.__new__(cls) if cls else AnyagentError(message)
    AnyagentError.__init__(err, message, **body)
    if cls is None:
        err.kind = kind  # type: ignore[misc]  # a kind this version does not know, kept on the instance (not the class)
    return err
