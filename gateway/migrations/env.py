"""Alembic environment: the URL comes from the caller (gateway.migrate), never from a file."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from gateway.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    connectable = config.attributes.get("connection") or create_engine(url, poolclass=pool.NullPool)
    if hasattr(connectable, "connect"):
        with connectable.connect() as connection:
            _run(connection, url)
    else:
        _run(connectable, url)


def _run(connection, url: str) -> None:  # noqa: ANN001
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=url.startswith("sqlite"),  # SQLite alters tables by copy
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
