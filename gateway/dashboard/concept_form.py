"""The dashboard's "New concept" form: the fields of POST /api/v1/concepts (`ConceptCreate`) for a
person who does not write JSON, sent to the same domain function (`create_concept`), so the stored
concept is the one the API would store. A probe is trained within the request, as the API does;
then the browser goes to the concept's page. A refused input answers the form again (4xx) with the
message beside the field it names, and nothing is stored."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Annotated, Any, NamedTuple

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy.orm import Session

from contracts.concepts import ConceptCreate
from gateway.dashboard.search_pages import error_view
from gateway.dashboard.views import check_csrf, render, shown_projects
from gateway.db import session_scope
from gateway.deps import CurrentUser, RequestId, SessionDep, require_login
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.service import create_concept
from gateway.domain.runs import repo as run_repo
from gateway.search.space import segment_uris

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
MAX_LABEL_CHOICES = 200  # checkboxes, most frequent first; a dataset with more has a box for the others
FIELD_NAMES = {"sae_run_id": "SAE run", "name": "Name", "description": "Description", "kind": "Kind",
               "expression": "Expression", "examples": "Labelled documents", "positive": "Positive labels",
               "negative": "Negative labels", "test_fraction": "Held-out share", "segment_words": "Segment words",
               "words_regex": "Your regex"}
EXAMPLE_FIELDS = (("examples.labels.positive", "positive"), ("examples.labels.negative", "negative"),
                  ("examples.test_fraction", "test_fraction"), ("examples.words_regex", "words_regex"),
                  ("examples", "examples"))


class ConceptForm(BaseModel):
    """What the person sent, as typed (kept to fill the form again after a refusal); every field is
    text, so that only `ConceptCreate` judges it and names the field."""

    model_config = ConfigDict(extra="ignore")

    csrf_token: str = ""
    sae_run_id: str = ""
    name: str = ""
    description: str = ""
    kind: str = "probe"
    expression: str = ""
    positive: list[str] = []
    negative: list[str] = []
    more_positive: str = ""  # one label a line: those beyond the checkboxes
    more_negative: str = ""
    segment_words: str = ""  # comma-separated
    test_fraction: str = "0.25"
    words_regex: str = ""
    words_regex_match: str = "positive"

    def body(self) -> dict[str, Any]:
        """The POST /api/v1/concepts body: the chosen kind's own fields (the other kind's, hidden in
        the page, are not sent); `examples` when any label is chosen."""
        body: dict[str, Any] = {"sae_run_id": self.sae_run_id, "name": self.name,
                                "description": self.description or None, "kind": self.kind}
        if self.kind == "expression":
            body["expression"] = self.expression
        else:
            body["segment_words"] = [w for w in self.segment_words.split(",") if w.strip()] or None
        positive, negative = _labels(self.positive, self.more_positive), _labels(self.negative, self.more_negative)
        if positive or negative:
            body["examples"] = {"labels": {"positive": positive, "negative": negative},
                                "test_fraction": self.test_fraction, "words_regex": self.words_regex or None,
                                "words_regex_match": self.words_regex_match}
        return body


def _labels(checked: list[str], typed: str) -> list[str]:
    return list(dict.fromkeys([*checked, *(line.strip() for line in typed.splitlines() if line.strip())]))


class RunChoice(NamedTuple):
    id: int
    dataset_name: str
    n_documents: int
    k: int | None
    n_latents: int | None
    has_segments: bool
    labels: list[tuple[str, int]]  # the dataset's labels with their document counts, most frequent first


def run_choices(request: Request, session: Session) -> list[RunChoice]:
    """The succeeded SAE runs of the current project, newest first."""
    return [RunChoice(run.id, ds.name, ds.n_documents, run.k, run.n_latents, segment_uris(run) is not None,
                      sorted((ds.label_counts or {}).items(), key=lambda item: (-item[1], item[0])))
            for run, ds in run_repo.succeeded_sae_runs(session, project_ids=shown_projects(request))]


def form_context(request: Request, session: Session, form: ConceptForm, error: dict[str, Any] | None) -> dict[str, Any]:
    runs = run_choices(request, session)
    chosen = next((r for r in runs if str(r.id) == form.sae_run_id.strip()), runs[0] if runs else None)
    return {"form": form, "error": error, "runs": runs, "chosen": chosen, "max_labels": MAX_LABEL_CHOICES,
            "field_names": FIELD_NAMES}


def form_field(path: str) -> str:
    """The form's field for a dotted path of the request (`examples.labels.positive.0` -> `positive`);
    `form` for one the form has no field for."""
    for prefix, field in EXAMPLE_FIELDS:
        if path == prefix or path.startswith(prefix + "."):
            return field
    head = path.split(".")[0]
    return head if head in FIELD_NAMES else "form"


def refusal(path: str, message: str, expression: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error the form shows beside its field; for an expression that does not parse, where."""
    where = None
    if extra and "line" in extra:
        candidates = [(c["index"], c["label"]) for c in extra.get("candidates", [])]
        where = error_view(expression, SimpleNamespace(message=message, line=extra["line"], column=extra["column"],
                                                       expected=extra.get("expected", []), candidates=candidates))
    return {"field": form_field(path), "path": path, "message": message, "where": where}


def validation_message(error: dict[str, Any]) -> str:
    """pydantic's message with its field, a list item by number and value (`segment_words.1` ->
    `segment_words, item 2 ("b")`), so a user sees which one it means."""
    loc = [str(part) for part in error["loc"]]
    if len(loc) > 1 and loc[-1].isdigit():
        value = error.get("input")
        shown = f' ("{value.strip()}")' if isinstance(value, str) and len(value) <= 60 else ""
        return f"{'.'.join(loc[:-1])}, item {int(loc[-1]) + 1}{shown}: {error['msg']}"
    return f"{'.'.join(loc)}: {error['msg']}" if loc else error["msg"]


@router.get("/concepts/new", response_class=HTMLResponse)
def new_concept_page(request: Request, session: SessionDep,
                     sae_run_id: Annotated[int | None, Query()] = None) -> Response:
    """The form; changing its SAE run asks again for the run's own fields (labels, segment words)."""
    ctx = form_context(request, session, ConceptForm(sae_run_id="" if sae_run_id is None else str(sae_run_id)), None)
    if request.headers.get("hx-request") and request.headers.get("hx-target") == "run-fields":
        return render(request, "partials/_concept_run_fields.html", ctx)
    return render(request, "pages/concept_new.html", ctx)


@router.post("/concepts", response_class=HTMLResponse)
async def create(request: Request, principal: CurrentUser, rid: RequestId,
                 form: Annotated[ConceptForm, Form()]) -> Response:
    check_csrf(request, form.csrf_token)
    try:
        body = form.body()
        if body["kind"] == "probe" and "examples" not in body:  # the form trains on labels; notes one by one: a queue
            raise ConceptInputError("examples: a probe is trained on labelled documents; choose its labels here, or "
                                    "label notes one by one from a search (Label these)", field="examples")
        concept_id = await create_concept(request.app.state, ConceptCreate.model_validate(body), principal, rid)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        error, status_code = refusal(path, validation_message(first), form.expression), 422
    except ConceptInputError as exc:
        error, status_code = refusal(exc.field, exc.message, form.expression, exc.extra), exc.status_code
    else:
        return Response(status_code=200, headers={"HX-Redirect": f"/concepts/{concept_id}"})
    with session_scope(request.app.state.factory) as session:
        return render(request, "partials/_concept_form.html", form_context(request, session, form, error),
                      status_code=status_code)
