"""`prisma serve`, `prisma worker`, `prisma service`: the gateway, the queues' workers, the services' apps."""

from __future__ import annotations

from typing import Annotated

import typer

from gateway import embedded
from gateway.cli.common import console
from gateway.config import get_settings

WORKER_MODULES = {"gateway": "gateway.worker", **embedded.WORKER_MODULES}
SERVICE_NAMES = embedded.SERVICE_NAMES


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    workers: Annotated[int, typer.Option(
        min=1, envvar="PRISMA_GATEWAY_WORKERS", help="Gateway processes sharing the port (distributed mode only: embedded mode runs its jobs "
                    "inside the one process). The gateway is CPU-bound Python: one per core.")] = 1,
) -> None:
    """Serve the API and the dashboard (embedded mode when DATABASE_URL and REDIS_URL are unset)."""
    import uvicorn

    from gateway.app import create_app

    settings = get_settings()
    mode = "embedded" if settings.embedded else "distributed"
    if workers > 1 and settings.embedded:
        console.print("[red]--workers > 1 needs distributed mode[/] (DATABASE_URL and REDIS_URL): in embedded mode "
                      "jobs run inside the gateway process, and SQLite takes one writer")
        raise typer.Exit(2)
    console.print(f"Prisma ({mode} mode, data in {settings.data_dir}) on http://{host}:{port}"
                  + (f", {workers} processes" if workers > 1 else ""))
    if workers == 1:
        uvicorn.run(create_app(settings), host=host, port=port, log_config=None, access_log=False)
        return
    settings.resolved_secret_key()  # generated once here, before the processes that share it start
    uvicorn.run("gateway.app:create_app", factory=True, workers=workers, host=host, port=port, log_config=None,
                access_log=False)


def worker(
    queue: Annotated[str, typer.Argument(help="gateway | embedder | sae | interpreter")],
    check: Annotated[bool, typer.Option("--check", help="Exit 0 if a worker of QUEUE is alive (health check).")] = False,
) -> None:
    """Run an arq worker for QUEUE (distributed mode; needs REDIS_URL). Start several to share a queue."""
    import importlib

    from arq.worker import check_health

    if queue not in WORKER_MODULES:
        console.print(f"[red]unknown queue {queue!r}[/]: choose one of {', '.join(WORKER_MODULES)}")
        raise typer.Exit(2)
    module = importlib.import_module("gateway.worker") if queue == "gateway" else embedded.worker_module(queue)
    settings_cls = module.WorkerSettings
    if check:
        raise typer.Exit(check_health(settings_cls))
    from gateway.leased_worker import leased_worker
    from gateway.logging import configure_logging

    settings = get_settings()
    configure_logging(settings.log_level, json_lines=settings.log_json)
    leased_worker(settings_cls, lease_s=settings.job_lease_s).run()


def service(
    name: Annotated[str, typer.Argument(help="embedder | sae | interpreter")],
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8001,
) -> None:
    """Serve a service's HTTP app (distributed mode; the gateway reaches it by PRISMA_<NAME>_URL)."""
    import uvicorn

    if name not in SERVICE_NAMES:
        console.print(f"[red]unknown service {name!r}[/]: choose one of {', '.join(SERVICE_NAMES)}")
        raise typer.Exit(2)
    from contracts.service_security import InsecureBind, check_bind

    token = embedded.service_settings(name).service_token
    try:
        check_bind(name, host, token.get_secret_value() if token else None)
    except InsecureBind as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from None
    application = embedded.service_app(name)
    console.print(f"Prisma {name} service on http://{host}:{port}")
    uvicorn.run(application, host=host, port=port, log_level="warning")
