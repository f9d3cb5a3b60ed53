"""`prisma user`, `prisma project`, `prisma apikey`: users, projects and their members, API keys."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from gateway.cli.common import account_command, console, session_factory_for
from gateway.config import GatewaySettings, get_settings

user_app = typer.Typer(help="Users (admin, editor, viewer).", no_args_is_help=True)
project_app = typer.Typer(help="Projects and their members.", no_args_is_help=True)
key_app = typer.Typer(help="API keys.", no_args_is_help=True)


def create_api_key(settings: GatewaySettings, name: str, *, user: str | None = None, read_only: bool = False,
                   expires_at: datetime | None = None) -> str:
    """A new key for `user` (default: the built-in administrator, `admin`); returns the plain key."""
    from gateway.db import session_scope
    from gateway.domain.auth.accounts import user_named
    from gateway.domain.auth.service import audit, create_key

    with session_scope(session_factory_for(settings)) as session:
        owner = user_named(session, user, field="--user") if user else None
        key, plain = create_key(session, name=name, user=owner, read_only=read_only, expires_at=expires_at)
        audit(session, None, "apikey.create", target_type="api_key", target_id=key.id)  # actor: "cli"
    return plain


@user_app.command("create")
def user_create(
    name: Annotated[str, typer.Argument(help="The user's name.")],
    role: Annotated[str, typer.Option(help="viewer (reads) | labeller (also labels notes) | editor (also creates "
                                            "and runs) | admin (also manages "
                                            "users, projects, keys, the audit log)")] = "viewer",
    project: Annotated[list[str] | None, typer.Option(help="Make the user a member of this project (repeatable).")] = None,
) -> None:
    """Create a user (keys are created for a user with `prisma apikey create --user NAME`)."""
    from gateway.domain.auth import accounts, repo

    def action(session):  # noqa: ANN001, ANN202
        user = accounts.create_user(session, name=name, role=role)
        for project_name in project or []:
            repo.add_membership(session, user_id=user.id, project_id=accounts.project_named(session, project_name).id)
        return user.id

    console.print(f"user [bold]{name}[/] ({role}) created, id {account_command(action)}")


@user_app.command("list")
def user_list() -> None:
    """Users, their roles and projects."""
    from gateway.domain.auth import repo

    with session_factory_for(get_settings())() as session:
        projects = {p.id: p.name for p in repo.list_projects(session)}
        for u in repo.list_users(session):
            names = ",".join(projects[i] for i in sorted(repo.project_ids_of(session, user_id=u.id)))
            print(f"{u.id}\t{u.name}\t{u.role}\t{names}")


@project_app.command("create")
def project_create(name: Annotated[str, typer.Argument(help="The project's name.")]) -> None:
    """Create a project (datasets are uploaded into a project; its members see them)."""
    from gateway.domain.auth import accounts

    project_id = account_command(lambda session: accounts.create_project(session, name=name).id)
    console.print(f"project [bold]{name}[/] created, id {project_id}")


def _membership_ids(session, project: str, user: str) -> dict[str, int]:  # noqa: ANN001
    """The ids a membership is keyed by, from the names given on the command line (a clear error for
    an unknown one)."""
    from gateway.domain.auth import accounts

    return {"user_id": accounts.user_named(session, user).id, "project_id": accounts.project_named(session, project).id}


@project_app.command("add-member")
def project_add_member(
    project: Annotated[str, typer.Argument(help="The project's name.")],
    user: Annotated[str, typer.Argument(help="The user's name.")],
) -> None:
    """Make USER a member of PROJECT."""
    from gateway.domain.auth import repo

    account_command(lambda session: repo.add_membership(session, **_membership_ids(session, project, user)))
    console.print(f"[bold]{user}[/] is a member of [bold]{project}[/]")


@project_app.command("remove-member")
def project_remove_member(
    project: Annotated[str, typer.Argument(help="The project's name.")],
    user: Annotated[str, typer.Argument(help="The user's name.")],
) -> None:
    """USER no longer sees PROJECT."""
    from gateway.domain.auth import repo

    account_command(lambda session: repo.remove_membership(session, **_membership_ids(session, project, user)))
    console.print(f"[bold]{user}[/] is no longer a member of [bold]{project}[/]")


@project_app.command("list")
def project_list() -> None:
    """Projects and their members."""
    from gateway.domain.auth import repo

    with session_factory_for(get_settings())() as session:
        for p in repo.list_projects(session):
            print(f"{p.id}\t{p.name}\t{','.join(u.name for u in repo.members_of(session, project_id=p.id))}")


@key_app.command("create")
def apikey_create(
    name: Annotated[str, typer.Option("--name", help="Who or what uses the key.")],
    user: Annotated[str | None, typer.Option(help="The user the key belongs to (default: admin).")] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="The key only reads, whatever the user's role.")] = False,
    expires: Annotated[datetime | None, typer.Option(help="Refused from this time on (UTC), e.g. 2027-01-31.")] = None,
) -> None:
    """Create an API key and print it (it is shown this once)."""
    from gateway.domain.auth.accounts import AccountError
    from gateway.domain.auth.service import KeyNameTaken

    try:
        plain = create_api_key(get_settings(), name, user=user, read_only=read_only, expires_at=expires)
    except (AccountError, KeyNameTaken, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    print(plain)


@key_app.command("revoke")
def apikey_revoke(key: Annotated[str, typer.Argument(help="The key's id or name.")]) -> None:
    """Revoke a key: it is refused from now on (its dashboard sessions with it)."""
    from gateway.domain.auth import repo
    from gateway.domain.auth.accounts import AccountError
    from gateway.domain.auth.models import ApiKey
    from gateway.domain.auth.service import audit

    def action(session):  # noqa: ANN001, ANN202
        row = session.get(ApiKey, int(key)) if key.isdigit() and len(key) < 10 else None
        row = row or repo.key_by_name(session, name=key)
        if row is None:
            raise AccountError(f"no API key {key!r}", field="key", status_code=404)
        repo.revoke_key(session, key=row)
        audit(session, None, "apikey.revoke", target_type="api_key", target_id=row.id)
        return row.name

    console.print(f"API key [bold]{account_command(action)}[/] revoked")


@key_app.command("list")
def apikey_list() -> None:
    """List API keys (never the keys themselves): id, name, prefix, user, state, read-only, expiry, created."""
    from gateway.domain.auth import repo

    with session_factory_for(get_settings())() as session:
        users = {u.id: u.name for u in repo.list_users(session)}
        for k in repo.list_keys(session):
            state = "revoked" if k.revoked_at else "active"
            expiry = f"{k.expires_at:%Y-%m-%d %H:%M}" if k.expires_at else "-"
            print(f"{k.id}\t{k.name}\t{k.prefix}\t{users.get(k.user_id, '?')}\t{state}\t"
                  f"{'read-only' if k.read_only else 'read-write'}\t{expiry}\t{k.created_at:%Y-%m-%d %H:%M}")
