"""`prisma`: serve, migrate, manage users, projects and keys, import datasets and embeddings, run workers,
run the demo."""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from gateway.config import PRIVATE_UMASK, GatewaySettings, get_settings, make_private

app = typer.Typer(help="Prisma: interpretable text embeddings.", no_args_is_help=True, add_completion=False)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
key_app = typer.Typer(help="API keys.", no_args_is_help=True)
ds_app = typer.Typer(help="Datasets.", no_args_is_help=True)
emb_app = typer.Typer(help="Embedding runs.", no_args_is_help=True)
user_app = typer.Typer(help="Users (admin, editor, viewer).", no_args_is_help=True)
project_app = typer.Typer(help="Projects and their members.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(user_app, name="user")
app.add_typer(project_app, name="project")
app.add_typer(key_app, name="apikey")
app.add_typer(ds_app, name="datasets")
app.add_typer(emb_app, name="embeddings")
console = Console(stderr=True)


@app.callback()
def _owner_only_files() -> None:
    """Every command's files (the database, uploads, artifacts, workers' shards) are owner-only."""
    os.umask(PRIVATE_UMASK)


def _factory(settings: GatewaySettings):  # noqa: ANN202
    from gateway.db import session_factory
    from gateway.migrate import upgrade

    make_private(settings.data_dir)
    if settings.auto_migrate if settings.auto_migrate is not None else settings.embedded:
        upgrade(settings.sqlalchemy_url)
    return session_factory(settings.sqlalchemy_url)


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION (default: head)."""
    from gateway.migrate import current, upgrade

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(settings.sqlalchemy_url, revision)
    console.print(f"database at revision [bold]{current(settings.sqlalchemy_url)}[/]")


@db_app.command("downgrade")
def db_downgrade(revision: str) -> None:
    """Revert migrations down to REVISION ('base' for an empty database)."""
    from gateway.migrate import current, downgrade

    settings = get_settings()
    downgrade(settings.sqlalchemy_url, revision)
    console.print(f"database at revision [bold]{current(settings.sqlalchemy_url)}[/]")


def create_api_key(settings: GatewaySettings, name: str, *, user: str | None = None, read_only: bool = False,
                   expires_at: datetime | None = None) -> str:
    """A new key for `user` (default: the built-in administrator, `admin`); returns the plain key."""
    from gateway.db import session_scope
    from gateway.domain.auth.accounts import user_named
    from gateway.domain.auth.service import audit, create_key

    with session_scope(_factory(settings)) as session:
        owner = user_named(session, user, field="--user") if user else None
        key, plain = create_key(session, name=name, user=owner, read_only=read_only, expires_at=expires_at)
        audit(session, None, "apikey.create", target_type="api_key", target_id=key.id)  # actor: "cli"
    return plain


def _account_command(action):  # noqa: ANN001, ANN202
    """Run `action(session)` in one unit of work; a refused request prints its reason and exits 2."""
    from gateway.db import session_scope
    from gateway.domain.auth.accounts import AccountError
    from gateway.domain.auth.service import KeyNameTaken

    try:
        with session_scope(_factory(get_settings())) as session:
            return action(session)
    except (AccountError, KeyNameTaken, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None


@user_app.command("create")
def user_create(
    name: Annotated[str, typer.Argument(help="The user's name.")],
    role: Annotated[str, typer.Option(help="viewer (reads) | editor (also creates and runs) | admin (also manages "
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

    console.print(f"user [bold]{name}[/] ({role}) created, id {_account_command(action)}")


@user_app.command("list")
def user_list() -> None:
    """Users, their roles and projects."""
    from gateway.domain.auth import repo

    with _factory(get_settings())() as session:
        projects = {p.id: p.name for p in repo.list_projects(session)}
        for u in repo.list_users(session):
            names = ",".join(projects[i] for i in sorted(repo.project_ids_of(session, user_id=u.id)))
            print(f"{u.id}\t{u.name}\t{u.role}\t{names}")


@project_app.command("create")
def project_create(name: Annotated[str, typer.Argument(help="The project's name.")]) -> None:
    """Create a project (datasets are uploaded into a project; its members see them)."""
    from gateway.domain.auth import accounts

    project_id = _account_command(lambda session: accounts.create_project(session, name=name).id)
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

    _account_command(lambda session: repo.add_membership(session, **_membership_ids(session, project, user)))
    console.print(f"[bold]{user}[/] is a member of [bold]{project}[/]")


@project_app.command("remove-member")
def project_remove_member(
    project: Annotated[str, typer.Argument(help="The project's name.")],
    user: Annotated[str, typer.Argument(help="The user's name.")],
) -> None:
    """USER no longer sees PROJECT."""
    from gateway.domain.auth import repo

    _account_command(lambda session: repo.remove_membership(session, **_membership_ids(session, project, user)))
    console.print(f"[bold]{user}[/] is no longer a member of [bold]{project}[/]")


@project_app.command("list")
def project_list() -> None:
    """Projects and their members."""
    from gateway.domain.auth import repo

    with _factory(get_settings())() as session:
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

    console.print(f"API key [bold]{_account_command(action)}[/] revoked")


@key_app.command("list")
def apikey_list() -> None:
    """List API keys (never the keys themselves): id, name, prefix, user, state, read-only, expiry, created."""
    from gateway.domain.auth import repo

    with _factory(get_settings())() as session:
        users = {u.id: u.name for u in repo.list_users(session)}
        for k in repo.list_keys(session):
            state = "revoked" if k.revoked_at else "active"
            expiry = f"{k.expires_at:%Y-%m-%d %H:%M}" if k.expires_at else "-"
            print(f"{k.id}\t{k.name}\t{k.prefix}\t{users.get(k.user_id, '?')}\t{state}\t"
                  f"{'read-only' if k.read_only else 'read-write'}\t{expiry}\t{k.created_at:%Y-%m-%d %H:%M}")


@ds_app.command("import")
def datasets_import(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    name: Annotated[str | None, typer.Option(help="Dataset name (default: the file name).")] = None,
    format: Annotated[str | None, typer.Option(help="csv | jsonl | zip (default: from the extension).")] = None,
    text_column: Annotated[str, typer.Option(help="Column or key with the text.")] = "text",
    id_column: Annotated[str | None, typer.Option(help="Column or key with the external id.")] = None,
    label_columns: Annotated[str | None, typer.Option(help="Comma-separated label columns.")] = None,
    project: Annotated[str | None, typer.Option(help="The project the dataset belongs to (default: 'default').")] = None,
) -> None:
    """Import FILE as a dataset, with a progress bar; all documents or none."""
    from gateway.domain.auth import accounts

    settings = get_settings()
    project_id = _account_command(lambda session: accounts.project_named(session, project).id) if project else None
    ds = import_file(settings, file, name=name, fmt=format, text_column=text_column, id_column=id_column,
                     label_columns=label_columns, project_id=project_id)
    console.print(f"dataset [bold]{ds.id}[/] '{ds.name}': {ds.n_documents:,} documents")


def import_file(
    settings: GatewaySettings, file: Path, *, name: str | None = None, fmt: str | None = None,
    text_column: str = "text", id_column: str | None = None, label_columns: str | None = None,
    project_id: int | None = None,
):  # noqa: ANN201
    from artifacts import ArtifactStore
    from contracts.datasets import ColumnMapping
    from gateway.domain.datasets.parsing import DatasetInputError
    from gateway.domain.datasets.service import ImportLimits, ImportRequest, import_dataset

    mapping = ColumnMapping(
        text=text_column, id=id_column,
        labels=[c.strip() for c in label_columns.split(",")] if label_columns else None,
    )
    size = file.stat().st_size
    # The parser reads the upload in place; the import writes its snapshot beside a private copy.
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    work = settings.uploads_dir / f"cli-{file.name}"
    shutil.copyfile(file, work)
    limits = ImportLimits(settings.max_document_bytes, settings.max_upload_bytes, settings.import_batch_size)
    req = ImportRequest(path=work, filename=file.name, name=name, declared_format=fmt, mapping=mapping, upload_size=size,
                        project_id=project_id)
    columns = [TextColumn("[bold]importing"), BarColumn(), TextColumn("{task.fields[docs]:,} docs"), TimeRemainingColumn()]
    try:
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task("import", total=None, docs=0)
            ds = import_dataset(
                _factory(settings), ArtifactStore(settings.artifact_root), req, limits=limits, principal=None,
                on_progress=lambda n, _total: bar.update(task, docs=n),
            )
    except DatasetInputError as exc:
        console.print(f"[red]import refused:[/] {exc.message}")
        raise typer.Exit(2) from None
    finally:
        work.unlink(missing_ok=True)
    return ds


@app.command()
def embed(
    dataset: Annotated[int, typer.Argument(help="Dataset id.")],
    model: Annotated[str, typer.Option(help="Local model directory, cached hub id, or 'default'.")] = "default",
    pooling: Annotated[str, typer.Option(help="mean | mean_content | cls")] = "mean",
    max_length: Annotated[int | None, typer.Option(help="Override the model's window (tokens).")] = None,
    shard_size: Annotated[int, typer.Option(help="Documents per checkpointed shard.")] = 2048,
) -> None:
    """Embed DATASET (chunk-and-average), with a progress bar; resumes an interrupted run."""
    import asyncio

    from contracts.runs import EmbeddingRunCreate
    from gateway.app import create_app
    from gateway.domain.auth.service import Principal
    from gateway.domain.runs.embedding import create_embedding_run
    from gateway.domain.runs.errors import RunInputError

    settings = get_settings()
    application = create_app(settings, configure_logs=False)
    body = EmbeddingRunCreate(dataset_id=dataset, model=model, pooling=pooling, max_length=max_length, shard_size=shard_size)
    try:
        run, created = asyncio.run(create_embedding_run(application.state, body, Principal(None, "cli"), None))
    except RunInputError as exc:
        console.print(f"[red]refused:[/] {exc.message}")
        raise typer.Exit(2) from None
    console.print(f"embedding run [bold]{run.id}[/] ({'started' if created else 'already exists'})")
    job = follow_job(application.state.factory, run.job_id)
    application.state.runner.shutdown()
    if job.status != "succeeded":
        console.print(f"[red]{job.status}[/]: {job.error or ''}")
        raise typer.Exit(1)
    result = job.result or {}
    console.print(f"done: {result.get('n_documents', 0):,} documents, {result.get('n_chunks', 0):,} chunks")


@emb_app.command("import")
def embeddings_import(
    dataset: Annotated[int, typer.Argument(help="Dataset id.")],
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help=(
        "Parquet (a 'vector' column and an id column: external_id, doc_id or position) or .npy [N, d] in "
        "dataset order."))],
    name: Annotated[str | None, typer.Option(
        help="The model's name, recorded as 'imported:<name>' (default: the file name).")] = None,
    dim: Annotated[int | None, typer.Option(help="Refuse the file unless its vectors have this dimension.")] = None,
    normalize: Annotated[bool, typer.Option(help="Scale each vector to unit L2 norm (as embedded runs are).")] = True,
    query_model: Annotated[str | None, typer.Option(help=(
        "Embedder model that embeds texts as these vectors were (enables text search and naming)."))] = None,
    query_pooling: Annotated[str, typer.Option(help="mean | mean_content | cls (with --query-model)")] = "mean",
    segments: Annotated[Path | None, typer.Option(exists=True, dir_okay=False, readable=True, help=(
        "Segment vectors too (for SAE runs with train_on segments): Parquet with an id column, char_start, "
        "char_end and vector, or .npz with arrays of those names (vectors [S, d])."))] = None,
) -> None:
    """Import vectors embedded elsewhere for DATASET as a succeeded embedding run; all or nothing."""
    import asyncio

    from gateway.app import create_app
    from gateway.domain.auth.service import Principal
    from gateway.domain.runs.embedding_import import import_embedding_run, import_request
    from gateway.domain.runs.errors import RunInputError

    fields = {"dataset_id": str(dataset), "name": name or "", "dim": "" if dim is None else str(dim),
              "normalize": str(normalize), "query_model": query_model or "", "query_pooling": query_pooling}
    application = create_app(get_settings(), configure_logs=False)
    try:
        req = import_request(fields, path=file, filename=file.name, segments_path=segments,
                             segments_filename=None if segments is None else segments.name)
        run = asyncio.run(import_embedding_run(application.state, req, Principal(None, "cli"), None))
    except RunInputError as exc:
        console.print(f"[red]import refused:[/] {exc.message}")
        raise typer.Exit(2) from None
    finally:
        application.state.runner.shutdown()
    console.print(f"embedding run [bold]{run.id}[/] ({run.model}): {run.n_documents:,} vectors of dimension {run.dim}")
    if segments is not None:
        result = run.result or {}
        console.print(f"segments: {result.get('n_segments_uploaded', 0):,} imported, "
                      f"{result.get('n_documents_without_segments', 0):,} documents without any given their whole text")


def follow_job(factory, job_id: str):  # noqa: ANN001, ANN201
    """Show a job's progress until it ends; returns its final row."""
    import time

    from gateway.domain.jobs import repo as job_repo

    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]}"), TimeRemainingColumn()]
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("embedding", total=None, rate="")
        while True:
            with factory() as session:
                job = job_repo.get_job(session, job_id=job_id)
            bar.update(task, completed=job.progress_done, total=job.progress_total,
                       rate=f"{job.rate:.1f} {job.progress_unit}/s" if job.rate else "")
            if job.status in ("succeeded", "failed", "cancelled"):
                return job
            time.sleep(0.5)


@app.command()
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


WORKER_MODULES = {"gateway": "gateway.worker", "embedder": "services.embedder.worker", "sae": "services.sae.worker",
                  "interpreter": "services.interpreter.worker"}
SERVICE_NAMES = ("embedder", "sae", "interpreter")


@app.command()
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
    settings_cls = importlib.import_module(WORKER_MODULES[queue]).WorkerSettings
    if check:
        raise typer.Exit(check_health(settings_cls))
    from gateway.leased_worker import leased_worker
    from gateway.logging import configure_logging

    settings = get_settings()
    configure_logging(settings.log_level, json_lines=settings.log_json)
    leased_worker(settings_cls, lease_s=settings.job_lease_s).run()


@app.command()
def service(
    name: Annotated[str, typer.Argument(help="embedder | sae | interpreter")],
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8001,
) -> None:
    """Serve a service's HTTP app (distributed mode; the gateway reaches it by PRISMA_<NAME>_URL)."""
    import importlib

    import uvicorn

    if name not in SERVICE_NAMES:
        console.print(f"[red]unknown service {name!r}[/]: choose one of {', '.join(SERVICE_NAMES)}")
        raise typer.Exit(2)
    from contracts.service_security import InsecureBind, check_bind

    token = importlib.import_module(f"services.{name}.config").get_settings().service_token
    try:
        check_bind(name, host, token.get_secret_value() if token else None)
    except InsecureBind as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from None
    application = importlib.import_module(f"services.{name}.app").create_app()
    console.print(f"Prisma {name} service on http://{host}:{port}")
    uvicorn.run(application, host=host, port=port, log_level="warning")


@app.command("demo-corpus")
def demo_corpus(
    out: Annotated[Path, typer.Argument(help="CSV file to write.")],
    n: Annotated[int, typer.Option(help="Number of notes.")] = 2000,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same file).")] = 0,
) -> None:
    """Write the seeded demo corpus of Italian paediatric visit notes."""
    from gateway.demo.corpus import write_csv

    path = write_csv(out, n=n, seed=seed)
    console.print(f"wrote {n:,} notes to {path}")


DEMO_NAME = "Demo: paediatric visit notes"


def _demo_dataset(settings: GatewaySettings, n: int):  # noqa: ANN202
    """The demo dataset: the one already imported in this data dir, or a freshly generated one."""
    from sqlalchemy import select

    from gateway.demo.corpus import write_csv
    from gateway.domain.datasets.models import Dataset

    with _factory(settings)() as session:
        existing = session.scalar(select(Dataset).where(Dataset.name == DEMO_NAME).order_by(Dataset.id))
    if existing is not None:
        return existing
    corpus = settings.data_dir / "demo" / "paediatric_notes.csv"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    write_csv(corpus, n=n)
    return import_file(settings, corpus, name=DEMO_NAME, id_column="id", label_columns="labels")


def _wait_status(state, getter, run_id: int) -> str:  # noqa: ANN001
    import time

    while True:
        with state.factory() as session:
            status = getter(session, run_id=run_id).status
        if status in ("succeeded", "failed", "cancelled"):
            return status
        time.sleep(2)


def _demo_sae_after(state, embedding_run_id: int) -> None:  # noqa: ANN001
    """Demo glue: once the corpus is embedded, train its SAE, name its features, then add the two
    ready concepts (each once)."""
    import asyncio

    from contracts.runs import SaeRunCreate
    from contracts.sae import SaeConfig
    from gateway.domain.auth.service import Principal
    from gateway.domain.concepts.demo import create_demo_concepts
    from gateway.domain.features.interpret import InterpretationRequest, start_interpretation
    from gateway.domain.jobs import repo as job_repo
    from gateway.domain.runs import repo as run_repo
    from gateway.domain.runs.sae import create_sae_runs

    demo = Principal(None, "demo")
    if _wait_status(state, run_repo.get_embedding_run, embedding_run_id) != "succeeded":
        return
    with state.factory() as session:
        existing = run_repo.list_sae_runs(session, embedding_run_id=embedding_run_id)
    if existing:
        sae_id = existing[-1].id
    else:
        # Trained on sentences and notes; a note's features are the max over its sentences (issue #16).
        # About 15 sentences a note: 8 passes are already three times the steps of 50 over the notes.
        config = SaeConfig(train_on="segments_and_documents", document_codes="max_over_segments", epochs=8)
        (run,) = asyncio.run(create_sae_runs(state, SaeRunCreate(embedding_run_id=embedding_run_id, config=config),
                                             demo, None))
        sae_id = run.id
    if _wait_status(state, run_repo.get_sae_run, sae_id) == "succeeded":
        # Deterministic job id: a demo started again does not name the features twice.
        job = asyncio.run(start_interpretation(state, sae_id, InterpretationRequest(), demo, None))
        _wait_status(state, lambda session, run_id: job_repo.get_job(session, job_id=run_id), job.id)
        # Named first, so that the concepts' features show their names; each concept is made once.
        asyncio.run(create_demo_concepts(state, sae_id, demo))


@app.command()
def demo(
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    n: Annotated[int, typer.Option(help="Number of demo notes.")] = 2000,
) -> None:
    """Generate and import the demo corpus (once), start its pipeline, and serve the dashboard."""
    import asyncio
    import secrets
    import threading

    import uvicorn

    from contracts.runs import EmbeddingRunCreate
    from gateway.app import create_app
    from gateway.domain.auth.service import Principal
    from gateway.domain.runs.embedding import create_embedding_run

    settings = get_settings()
    if not settings.embedded:
        console.print("[red]the demo runs in embedded mode: unset DATABASE_URL and REDIS_URL[/]")
        raise typer.Exit(2)
    ds = _demo_dataset(settings, n)
    key = create_api_key(settings, f"demo-{secrets.token_hex(3)}")
    application = create_app(settings)
    # Segments: a note's sentences embedded too, so that one mention's status is not averaged away.
    run, _ = asyncio.run(create_embedding_run(application.state, EmbeddingRunCreate(dataset_id=ds.id, segments=True),
                                              Principal(None, "demo"), None))
    threading.Thread(target=_demo_sae_after, args=(application.state, run.id), daemon=True, name="demo-chain").start()
    print(f"\nPrisma demo: {ds.n_documents:,} documents in dataset {ds.id}; embedding run {run.id} is {run.status}.")
    print(f"  Open   http://127.0.0.1:{port}/login")
    print(f"  Key    {key}\n", flush=True)
    uvicorn.run(application, host="127.0.0.1", port=port, log_config=None, access_log=False)


if __name__ == "__main__":
    app()
