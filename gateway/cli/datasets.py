"""`prisma datasets`: importing a file as a dataset."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from gateway.cli.common import account_command, console, session_factory_for
from gateway.config import GatewaySettings, get_settings

app = typer.Typer(help="Datasets.", no_args_is_help=True)


@app.command("import")
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
    project_id = account_command(lambda session: accounts.project_named(session, project).id) if project else None
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
                session_factory_for(settings), ArtifactStore(settings.artifact_root), req, limits=limits, principal=None,
                on_progress=lambda n, _total: bar.update(task, docs=n),
            )
    except DatasetInputError as exc:
        console.print(f"[red]import refused:[/] {exc.message}")
        raise typer.Exit(2) from None
    finally:
        work.unlink(missing_ok=True)
    return ds
