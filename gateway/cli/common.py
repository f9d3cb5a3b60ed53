"""What every command group of `prisma` shares: the console and the session factory."""

from __future__ import annotations

import typer
from rich.console import Console

from gateway.config import GatewaySettings, get_settings, make_private

console = Console(stderr=True)


def session_factory_for(settings: GatewaySettings):  # noqa: ANN202
    """The database's session factory (migrated first in embedded mode or with auto_migrate)."""
    from gateway.db import session_factory
    from gateway.migrate import upgrade

    make_private(settings.data_dir)
    if settings.auto_migrate if settings.auto_migrate is not None else settings.embedded:
        upgrade(settings.sqlalchemy_url)
    return session_factory(settings.sqlalchemy_url)


def account_command(action):  # noqa: ANN001, ANN202
    """Run `action(session)` in one unit of work; a refused request prints its reason and exits 2."""
    from gateway.db import session_scope
    from gateway.domain.auth.accounts import AccountError
    from gateway.domain.auth.service import KeyNameTaken

    try:
        with session_scope(session_factory_for(get_settings())) as session:
            return action(session)
    except (AccountError, KeyNameTaken, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
