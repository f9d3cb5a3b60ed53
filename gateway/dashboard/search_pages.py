"""The search page of an SAE run: feature expressions, text and labels, all as GET URLs (shareable:
`/sae-runs/3/search?q=F12` opens with that expression run). An HTMX request gets only the results
(`_search_results.html`) or the error (`_search_error.html`, the column marked); autocompletion of
feature names is a fragment of <option>s for the box's datalist."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any, Literal, NamedTuple
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from contracts.search import MAX_TEXT_RESULTS, DocumentHit, ExpressionSearch, LabelSearch, TextSearch
from gateway.dashboard.feature_examples import Excerpt
from gateway.dashboard.sae_pages import crumbs, sae_run_or_404
from gateway.dashboard.views import Pager, render
from gateway.deps import SessionDep, require_login
from gateway.domain.auth import trail
from gateway.domain.features import repo as feature_repo
from gateway.domain.runs.query_model import NoQueryModel
from gateway.search import service
from gateway.search.expressions import ExpressionError, FeatureOutOfRange, UnknownFamilyError, UnknownLabelError
from gateway.search.label_rank import LabelEntry, quote_label, quoted_label, rank_labels
from gateway.search.space import SearchNotReady, codes_or_none, segment_uris
from gateway.services import ServiceError, ServiceUnavailable

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_login)])
PER_PAGE = 20
SUGGESTIONS = 12
SUGGESTION_POOL = 400
"""Matches ranked (label_rank.py) before the completion keeps SUGGESTIONS: cut by score alone first, a run
whose keyword evidence mentions the typed word more often than its names do offered no name holding it."""
EXAMPLE_POOL = 200
"""Reliable features read (best score first) to find two names for the examples under the box."""
MAX_SUGGEST_CHARS = 2_000  # completion is for typing; a longer box is answered 422 (q)
MAX_SUGGEST_WORDS = 200  # label words looked up, as the features list's own filter
KEYWORDS = ("AND", "OR", "NOT", "ANY", "SEGMENT", "SENTENCE")


class Typed(NamedTuple):
    """The token being typed at the end of the box: label:"wor…, F12…, or a bare word."""

    kind: Literal["label", "index", "word"]
    start: int  # where it begins: a suggestion replaces q[start:]
    text: str  # the label's words so far, the index's digits, or the word


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"  # what the regex \w matches


def typed_tail(q: str) -> Typed | None:
    """The token at the end of `q`, in one backward pass. A regex anchored at the end but searched
    from every position was quadratic: 0.9 s a keystroke on a 10 kB box."""
    quote = q.rfind('"')
    if quote >= 0:  # label:"words… (an open quote after label:)
        before = q[:quote].rstrip()
        if before.endswith(":"):
            before = before[:-1].rstrip()
            if before[-5:].lower() == "label":
                return Typed("label", len(before) - 5, q[quote + 1:])
    start = len(q)
    while start > 0 and _is_word(q[start - 1]):
        start -= 1
    run = q[start:]
    digits = run[1:]
    if run[:1] in ("F", "f") and (digits == "" or digits.isdecimal()):
        return Typed("index", start, digits)
    first_letter = next((i for i, char in enumerate(run) if not char.isdecimal()), None)
    return Typed("word", start + first_letter, run[first_letter:]) if first_letter is not None else None


def run_examples(session: SessionDep, run: Any) -> list[str]:
    """The examples under the box, written from this run's own features, so that each one runs: two reliable
    names, the second excluded (within one segment where the run has segment codes), and the same two features by
    index, compared at half their strongest activation and weighed. The two names are the best-scored pair where
    the second holds every word of the first and more ("bronchiolite" AND NOT "sospetta bronchiolite": the kind
    of query the page is for), else the two best names. With fewer than two reliable names, the two densest
    features by index only; none before the run has features."""
    rows, _ = feature_repo.list_features(session, sae_run_id=run.id, sort="score", limit=EXAMPLE_POOL, offset=0,
                                         reliability="reliable")
    named: dict[str, Any] = {}
    for feature, best in rows:
        named.setdefault(best.label.strip().casefold(), (feature, best.label))
    words = {key: set(re.findall(r"\w+", key)) for key in named}
    refined = next(((a, b) for a in named for b in named if words[a] and words[a] < words[b]), None)
    pair = [named[k] for k in refined] if refined else list(named.values())[:2]
    if len(pair) < 2:
        dense, _ = feature_repo.list_features(session, sae_run_id=run.id, sort="density", limit=2, offset=0)
        pair = [(feature, None) for feature, _ in dense]
    if not pair:
        return []
    (a, label_a), (b, label_b) = pair[0], pair[-1]
    half = f"{max(a.max_activation, 0.0) / 2:.4f}".rstrip("0").rstrip(".")  # a plain decimal, as the grammar reads
    examples = [f"F{a.index} > {half}" + (f" AND NOT F{b.index}" if b is not a else ""),
                f"0.7*F{a.index} + 0.3*F{b.index} >= {half}"]
    if label_a is not None and label_b is not None:
        names = f"{quoted_label(label_a)} AND NOT {quoted_label(label_b)}"
        examples.insert(0, f"SEGMENT({names})" if segment_uris(run) else names)
    return examples


def error_view(text: str, exc: Exception) -> dict[str, Any]:
    """The message, and the expression cut around the place it names (line, column, 1-based)."""
    line, column = getattr(exc, "line", 1), getattr(exc, "column", 1)
    lines = text.split("\n")
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    at = max(column - 1, 0)
    offset = sum(len(earlier) + 1 for earlier in lines[: line - 1]) + at  # in the whole text, for the caret
    return {"message": getattr(exc, "message", str(exc)), "line": line, "column": column, "offset": offset,
            "before": source[:at], "at": source[at:at + 1] or " ", "after": source[at + 1:],
            "expected": getattr(exc, "expected", []), "candidates": getattr(exc, "candidates", []),
            "suggestion": getattr(exc, "suggestion", None), "words": getattr(exc, "words", None)}


def highlighted(hit: DocumentHit) -> Excerpt:
    """The hit's excerpt in three pieces, the middle one its matched segment (empty when none): the
    template escapes each piece and marks the middle one."""
    text, offset = hit.excerpt, hit.excerpt_start
    if hit.segment is None:
        return Excerpt(text, "", "", offset > 0, False)
    start = min(max(hit.segment.start - offset, 0), len(text))
    end = min(max(hit.segment.end - offset, start), len(text))
    return Excerpt(text[:start], text[start:end], text[end:], offset > 0, False)


async def run_search(state: Any, run_id: int, mode: str, q: str, method: str, offset: int) -> tuple[Any, str | None]:
    """(result, None) or (None, error message) for problems other than the expression's."""
    try:
        if mode == "text":
            body = TextSearch(mode="text", text=q, limit=PER_PAGE, offset=min(offset, MAX_TEXT_RESULTS - PER_PAGE))
            return await service.text_search(state, run_id, body), None
        if mode == "label":
            body = LabelSearch(mode="label", query=q, method=method, limit=PER_PAGE, offset=offset)
            return await service.label_query(state, run_id, body), None
        body = ExpressionSearch(mode="expression", expression=q, limit=PER_PAGE, offset=offset)
        return await asyncio.to_thread(service.expression_search, state, run_id, body), None
    except ValidationError as exc:
        return None, exc.errors()[0]["msg"]
    except (SearchNotReady, ServiceUnavailable, ServiceError) as exc:
        return None, str(exc)
    except NoQueryModel as exc:
        return None, exc.message


@router.get("/sae-runs/{run_id}/search", response_class=HTMLResponse)
async def search_page(
    request: Request, run_id: int, session: SessionDep,
    q: Annotated[str, Query(max_length=10_000)] = "",
    mode: Annotated[str, Query(pattern="^(expression|text|label)$")] = "expression",
    method: Annotated[str, Query(pattern="^(fulltext|semantic)$")] = "fulltext",
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    run = sae_run_or_404(session, run_id)
    ctx: dict[str, Any] = {**crumbs(session, run), "q": q, "mode": mode, "method": method, "result": None,
                           "error": None, "problem": None, "pager": None, "page_url": None, "excerpts": {}}
    status = 200
    if q.strip():
        try:
            ctx["result"], ctx["problem"] = await run_search(request.app.state, run.id, mode, q, method, offset)
        except (ExpressionError, FeatureOutOfRange, UnknownLabelError, UnknownFamilyError) as exc:
            ctx["error"], status = error_view(q, exc), 422
        if ctx["problem"]:
            status = 422
        if ctx["result"] is not None:
            total = min(ctx["result"].total, MAX_TEXT_RESULTS) if mode == "text" else ctx["result"].total
            ctx["pager"] = Pager(offset=ctx["result"].offset, limit=PER_PAGE, total=total)
            ctx["page_url"] = f"/sae-runs/{run.id}/search?" + urlencode({"mode": mode, "q": q, "method": method})
            trail.record_search(session, run.id, q, mode, ctx["result"])
            if mode != "label":
                ctx["excerpts"] = {d.position: highlighted(d) for d in ctx["result"].items}
    if request.headers.get("hx-request") and request.headers.get("hx-target") == "search-results":
        return render(request, "partials/_search_results.html", ctx, status_code=status)
    ctx["examples"] = run_examples(session, run)  # the box's, on the whole page only: an HTMX search swaps the results
    return render(request, "pages/search.html", ctx, status_code=status)


@router.get("/sae-runs/{run_id}/search/suggest", response_class=HTMLResponse)
def suggest(request: Request, run_id: int, session: SessionDep,
            q: Annotated[str, Query(max_length=MAX_SUGGEST_CHARS)] = "") -> Response:
    """<option>s completing the feature being typed at the end of the box: each option's value is
    the whole expression with that feature filled in (a datalist replaces the input's value)."""
    run = sae_run_or_404(session, run_id)
    tail = typed_tail(q) if q.strip() else None
    options: list[dict[str, str]] = []
    if tail is not None and tail.kind == "index":
        options = _by_index(session, run.id, q[: tail.start], tail.text)
    elif tail is not None:
        words = tail.text.strip()
        if words and len(words) <= MAX_SUGGEST_WORDS and words.upper() not in KEYWORDS:
            options = _by_label(session, run.id, q[: tail.start], words, codes_or_none(session, request.app.state.store, run))
    return render(request, "partials/_search_suggestions.html", {"options": options})


def _notes(n: int) -> str:
    return "1 note" if n == 1 else f"{n} notes"


def _by_label(session: SessionDep, run_id: int, prefix: str, words: str, codes: Any = None) -> list[dict[str, str]]:
    """One option per shown label, ranked by how well the name holds (gateway/search/label_rank.py), each saying
    how many notes label:"…" would select; features that share a label share its option (label:"…" reads them
    all), each unreliable one marked."""
    rows, _ = feature_repo.list_features(session, sae_run_id=run_id, sort="score", limit=SUGGESTION_POOL, offset=0,
                                         text=words)
    ranked = rank_labels([LabelEntry(f.index, best.label, best.description, best.score, best.reliable, best.threshold,
                                     f.density) for f, best in rows if best is not None], codes, words)[:SUGGESTIONS]
    by_label: dict[str, tuple[str, list[int], list[int], list[int]]] = {}
    for entry, notes in ranked:
        _, indices, unreliable, counts = by_label.setdefault(entry.label.strip().casefold(), (entry.label, [], [], []))
        indices.append(entry.index)
        if notes is not None:
            counts.append(notes)
        if entry.reliable is False:
            unreliable.append(entry.index)
    options = []
    for label, indices, unreliable, counts in by_label.values():
        mark = "" if not unreliable else " (unreliable)" if len(indices) == 1 else \
            f" ({', '.join(f'F{i}' for i in unreliable)} unreliable)"
        selects = f" · selects {_notes(max(counts))}{'+' if len(counts) > 1 else ''}" if counts else ""
        options.append({"value": f'{prefix}label:"{quote_label(label)}"',
                        "text": ", ".join(f"F{i}" for i in indices) + f" · {label}{mark}{selects}"})
    return options


def _by_index(session: SessionDep, run_id: int, prefix: str, digits: str) -> list[dict[str, str]]:
    if not digits:
        return []
    found = feature_repo.features_by_index(session, sae_run_id=run_id, indices=[int(digits)])
    out = []
    for index, (_, best) in found.items():
        name = best.label if best is not None else "not named yet"
        out.append({"value": f"{prefix}F{index}", "text": f"F{index} · {name}"})
    return out
