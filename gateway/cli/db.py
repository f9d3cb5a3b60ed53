"""`prisma db`: the database schema."""

from __future__ import annotations

import typer

from gateway.cli.common import console
from gateway.config import get_settings

app = typer.Typer(help="Database schema.", no_args_is_help=True)


@app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION (default: head)."""
    from gateway.migrate import current, upgrade

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(settings.sqlalchemy_url, revision)
    console.print(f"database at revision [bold]{current(settings.sqlalchemy_url)}[/]")


@app.command("downgrade")
def db_downgrade(revision: str) -> None:
    """Revert migrations down to REVISION ('base' for an empty database)."""
    from gateway.migrate import current, downgrade

    settings = get_settings()
    downgrade(settings.sqlalchemy_url, revision)
    console.print(f"database at revision [bold]{current(settings.sqlalchemy_url)}[/]")
