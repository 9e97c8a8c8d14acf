"""Verified ACLs: a pipeline's subtree is used only if no one else can write it.

A client with credentials that protects what it creates (digest ``auth_data`` and a ``default_acl`` that
grants write rights to those credentials only) must not adopt a subtree created by someone else: a
client without credentials that created ``<root>/<pipeline>`` first would keep it world-writable and
could forge history, frontier and configuration. :func:`verify_pipeline_acls` reads the ACLs of the
nodes the ledger creates with a pipeline and refuses, naming the node and the ACL found, when anyone
else can write, create, delete or change the ACL (a fixed set of nodes: cheap enough for every ledger).
:func:`audit_pipeline_acls` walks the *whole* subtree, level by level in batches of asynchronous reads,
and returns every node that anyone but this client may write or administer (``airflow-epochs acl
check PIPELINE``); :func:`repair_pipeline_acls` sets the client's own ACL on every node it may change
and names each one it may not (``airflow-epochs acl repair PIPELINE``).

Reading other identities is fine (a world-readable pipeline is a choice); writing is not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoAuthError, NoNodeError, OperationTimeoutError, SessionExpiredError
from kazoo.security import Permissions, make_digest_acl_credential

from airflow_epochs.coordination.base.errors import CoordinationUnavailable, InvalidInput, StateError
from airflow_epochs.coordination.base.paths import PipelinePaths, child_path

# Rights that let an identity change what the ledger reads: set data, add or remove children, change the ACL.
_WRITE_RIGHTS = Permissions.WRITE | Permissions.CREATE | Permissions.DELETE | Permissions.ADMIN
_LETTERS = ((Permissions.CREATE, "c"), (Permissions.DELETE, "d"), (Permissions.READ, "r"),
            (Permissions.WRITE, "w"), (Permissions.ADMIN, "a"))
_UNREACHABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)
AUDIT_BATCH = 256  # nodes whose ACL and children are asked for at once while walking a subtree
_ANSWER_TIMEOUT = 30.0


class InsecureAcl(StateError):
    """A node of the pipeline's subtree can be written by an identity other than this client's.

    :param path: the node.
    :param acl: the ACL found, as ``scheme:id:rights`` entries (digest hashes left out).
    """

    def __init__(self, message: str, *, path: str, acl: str, nodes: tuple[str, ...] = ()) -> None:
        self.path = path
        self.acl = acl
        self.nodes = nodes or (path,)
        super().__init__(message)


@dataclass(frozen=True)
class _AclEntry:
    """One entry of a node's ACL in a log-safe form."""

    scheme: str
    identity: str
    perms: int

    def __str__(self) -> str:
        rights = "".join(letter for bit, letter in _LETTERS if self.perms & bit) or "-"
        return f"{self.scheme}:{self.identity}:{rights}"


def _own_identities(client: KazooClient) -> set[tuple[str, str]]:
    """The ``(scheme, id)`` pairs this client authenticates as (digest credentials only)."""
    found: set[tuple[str, str]] = set()
    for scheme, credential in getattr(client, "auth_data", ()) or ():
        if scheme == "digest" and ":" in credential:
            user, _, password = credential.partition(":")
            found.add(("digest", make_digest_acl_credential(user, password)))
    return found


def protects_what_it_creates(client: KazooClient) -> bool:
    """Whether the client has digest credentials and creates nodes that only those credentials can write:
    the condition under which an ACL check means anything."""
    mine = _own_identities(client)
    default = list(getattr(client, "default_acl", None) or ())
    if not mine or not default:
        return False
    return not _foreign_writers(default, mine) and any((acl.id.scheme, acl.id.id) in mine for acl in default)


def _pipeline_nodes(paths: PipelinePaths) -> list[str]:
    """The nodes the ledger creates together with a pipeline (and the leadership lease)."""
    return [paths.base, paths.config_dir, paths.epochs, paths.frontier, paths.history, paths.snapshots,
            paths.requests, paths.locks, paths.consumers, paths.leader]


def verify_pipeline_acls(client: KazooClient, paths: PipelinePaths) -> None:
    """Refuse a pipeline subtree that identities other than this client's can write.

    Does nothing for a client without credentials or one that creates open nodes (nothing to protect),
    and for nodes that do not exist yet (the ledger creates them with the client's ACL). The config
    versions are checked too: they are created with the pipeline.

    :raises InsecureAcl: a node is writable by others, or its ACL cannot even be read (created by
        another identity); nothing was written.
    :raises CoordinationUnavailable: ZooKeeper could not be asked.
    """
    if not protects_what_it_creates(client):
        return
    mine = _own_identities(client)
    try:
        for path in _pipeline_nodes(paths):
            _check_node(client, paths.pipeline, path, mine)
        # The config node is ours by now, so listing its versions is allowed.
        versions = client.get_children(paths.config_dir) if client.exists(paths.config_dir) else []
        for child in sorted(versions):
            _check_node(client, paths.pipeline, child_path(paths.config_dir, child), mine)
    except NoNodeError:  # removed while being checked: nothing of it will be adopted
        return
    except _UNREACHABLE as exc:
        raise CoordinationUnavailable(f"could not check the ACLs of pipeline {paths.pipeline!r}: "
                                      f"{type(exc).__name__}") from None


def _check_node(client: KazooClient, pipeline: str, path: str, mine: set[tuple[str, str]]) -> None:
    try:
        acls, _ = client.get_acls(path)
    except NoNodeError:
        return
    except NoAuthError:
        raise InsecureAcl(
            f"pipeline {pipeline!r}: the ACL of {path} cannot be read with this connection's credentials: "
            "the node was created by another identity; refusing to use it (an operator with rights on it must "
            f"remove it or run 'airflow-epochs acl repair {pipeline}' as its owner)",
            path=path, acl="unreadable") from None
    foreign = _foreign_writers(acls, mine)
    if foreign:
        found = describe(acls)
        raise InsecureAcl(
            f"pipeline {pipeline!r}: {path} can be written by {', '.join(str(e) for e in foreign)} (ACL found: "
            f"{found}); refusing to use a subtree others can write. Repair it with 'airflow-epochs acl repair "
            f"{pipeline}' and check its history for records you did not write",
            path=path, acl=found)


def _entry(acl: Any) -> _AclEntry:
    identity = str(acl.id.id)
    if acl.id.scheme == "digest":  # user:hash -> user; the hash is a password equivalent for brute force
        identity = identity.split(":", 1)[0]
    return _AclEntry(str(acl.id.scheme), identity, int(acl.perms))


def _foreign_writers(acls: Iterable[Any], mine: set[tuple[str, str]]) -> list[_AclEntry]:
    return [_entry(acl) for acl in acls if acl.perms & _WRITE_RIGHTS and (acl.id.scheme, acl.id.id) not in mine]


def describe(acls: Sequence[Any]) -> str:
    """An ACL as ``scheme:id:rights`` entries, digest hashes left out."""
    return ", ".join(str(_entry(acl)) for acl in acls) or "(empty)"


@dataclass(frozen=True)
class AclFinding:
    """A node of a pipeline's subtree that someone other than this client may write or administer.

    :param path: the node.
    :param acl: its ACL as ``scheme:id:rights`` entries, or ``unreadable`` (another identity's node).
    :param foreign: the entries that grant others write or admin rights (empty when unreadable).
    """

    path: str
    acl: str
    foreign: tuple[str, ...]

    def __str__(self) -> str:
        if self.acl == "unreadable":
            return f"{self.path} has an ACL these credentials cannot read (another identity's node)"
        return f"{self.path} can be written by {', '.join(self.foreign)} (ACL found: {self.acl})"


def _walk_acls(client: KazooClient, top: str, *, batch: int = AUDIT_BATCH) -> Iterator[tuple[str, list[Any] | None]]:
    """Every node under ``top`` (``top`` included) with its ACL (None if it cannot be read), breadth first;
    each level is read in batches of ``batch`` asynchronous requests (ACLs and children together)."""
    level = [top]
    while level:
        following: list[str] = []
        for start in range(0, len(level), batch):
            chunk = level[start:start + batch]
            asked = [(path, client.get_acls_async(path), client.get_children_async(path)) for path in chunk]
            for path, acl_answer, children_answer in asked:
                try:
                    acl_list, _stat = acl_answer.get(timeout=_ANSWER_TIMEOUT)
                    acls: list[Any] | None = list(acl_list)
                except NoNodeError:
                    continue  # removed meanwhile
                except NoAuthError:
                    acls = None
                yield path, acls
                try:
                    children = children_answer.get(timeout=_ANSWER_TIMEOUT)
                except (NoNodeError, NoAuthError):
                    children = []
                following += [child_path(path, child) for child in sorted(children)]
        level = following


def audit_pipeline_acls(client: KazooClient, paths: PipelinePaths, *, batch: int = AUDIT_BATCH) -> list[AclFinding]:
    """Every node of the pipeline's subtree (walked whole, in batches) that an identity other than this
    client's may write, create in, delete from or administer, or whose ACL it cannot even read.

    :raises InvalidInput: the client has no credentials or creates open nodes (nothing to compare with),
        or the pipeline does not exist.
    :raises CoordinationUnavailable: ZooKeeper could not be asked.
    """
    if not protects_what_it_creates(client):
        raise InvalidInput("checking ACLs needs digest credentials with use_acl (the connection's login and "
                           "password): the ACL compared with is the one this connection creates nodes with")
    mine = _own_identities(client)
    findings: list[AclFinding] = []
    try:
        if client.exists(paths.base) is None:
            raise InvalidInput(f"pipeline {paths.pipeline!r} does not exist at {paths.base}")
        for path, acls in _walk_acls(client, paths.base, batch=batch):
            if acls is None:
                findings.append(AclFinding(path, "unreadable", ()))
                continue
            foreign = _foreign_writers(acls, mine)
            if foreign:
                findings.append(AclFinding(path, describe(acls), tuple(str(e) for e in foreign)))
    except _UNREACHABLE as exc:
        raise CoordinationUnavailable(f"could not check the ACLs of pipeline {paths.pipeline!r}: "
                                      f"{type(exc).__name__}") from None
    return findings


def repair_pipeline_acls(client: KazooClient, paths: PipelinePaths) -> list[str]:
    """Set this client's own ACL (its ``default_acl``) on every node of the pipeline's subtree.

    Content is not repaired: records forged while the subtree was open stay; read the history.

    :returns: the nodes whose ACL was changed.
    :raises InvalidInput: the client has no credentials or creates open nodes (there is nothing to set).
    :raises InsecureAcl: some nodes cannot be changed with these credentials (their ADMIN right belongs
        to another identity): every other node was repaired, and the message names each refused one
        (``nodes`` lists them).
    """
    if not protects_what_it_creates(client):
        raise InvalidInput("repairing ACLs needs digest credentials with use_acl (the connection's login and "
                           "password): the ACL set is the one this connection creates nodes with")
    wanted = list(client.default_acl)
    mine = _own_identities(client)
    changed: list[str] = []
    refused: list[str] = []
    pending = [paths.base]
    try:
        if client.exists(paths.base) is None:
            raise InvalidInput(f"pipeline {paths.pipeline!r} does not exist at {paths.base}")
        while pending:
            path = pending.pop()
            try:
                acls, stat = client.get_acls(path)
                if _foreign_writers(acls, mine) or not any((a.id.scheme, a.id.id) in mine for a in acls):
                    client.set_acls(path, wanted, version=stat.aversion)
                    changed.append(path)
            except NoNodeError:
                continue
            except NoAuthError:
                refused.append(path)  # keep going: repair every node that can be repaired
            try:
                pending += [child_path(path, child) for child in client.get_children(path)]
            except (NoNodeError, NoAuthError):
                continue
    except _UNREACHABLE as exc:
        raise CoordinationUnavailable(f"could not repair the ACLs of pipeline {paths.pipeline!r}: "
                                      f"{type(exc).__name__}") from None
    if refused:
        shown = ", ".join(sorted(refused)[:20]) + (f" and {len(refused) - 20} more" if len(refused) > 20 else "")
        raise InsecureAcl(f"pipeline {paths.pipeline!r}: repaired {len(changed)} node(s) but cannot change the ACL of "
                          f"{len(refused)} with this connection's credentials (another identity holds their ADMIN "
                          f"right): {shown}; an operator with ZooKeeper's super digest must repair or remove them",
                          path=sorted(refused)[0], acl="not ours", nodes=tuple(sorted(refused)))
    return changed
