"""Users, projects and memberships: creating them, and choosing the project a new dataset goes to.

An install starts with one administrator, `admin`, and one project, `default` (migration 0005 makes
them, and gives them every key and dataset of an install from before users existed).
"""

from __future__ import annotations

import re

from sqlalchemy.orm import Session

from gateway.domain.auth import repo
from gateway.domain.auth.models import ROLES, Project, User
from gateway.domain.auth.principal import Principal

ADMIN_USER = "admin"
DEFAULT_PROJECT = "default"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")


class AccountError(ValueError):
    """A bad user, project or membership request: a 4xx naming the field."""

    def __init__(self, message: str, *, field: str, status_code: int = 422) -> None:
        super().__init__(message)
        self.message, self.field, self.status_code = message, field, status_code


def _checked_name(name: str, field: str) -> str:
    name = name.strip()
    if not NAME_PATTERN.fullmatch(name):
        raise AccountError(f"{field}: 1 to 100 letters, digits or . _ @ - (starting with a letter or digit)",
                           field=field)
    return name


def default_project(session: Session) -> Project:
    return repo.project_by_name(session, name=DEFAULT_PROJECT) or repo.add_project(session, name=DEFAULT_PROJECT)


def admin_user(session: Session) -> User:
    """The built-in administrator (a member of the default project), made if missing."""
    user = repo.user_by_name(session, name=ADMIN_USER)
    if user is None:
        user = repo.add_user(session, name=ADMIN_USER, role="admin")
        repo.add_membership(session, user_id=user.id, project_id=default_project(session).id)
    return user


def create_user(session: Session, *, name: str, role: str) -> User:
    name = _checked_name(name, "name")
    if role not in ROLES:
        raise AccountError(f"role: must be one of {', '.join(ROLES)}", field="role")
    if repo.user_by_name(session, name=name) is not None:
        raise AccountError(f"name: a user named {name!r} already exists", field="name", status_code=409)
    return repo.add_user(session, name=name, role=role)


def create_project(session: Session, *, name: str) -> Project:
    name = _checked_name(name, "name")
    if repo.project_by_name(session, name=name) is not None:
        raise AccountError(f"name: a project named {name!r} already exists", field="name", status_code=409)
    return repo.add_project(session, name=name)


def user_named(session: Session, name: str, *, field: str = "user") -> User:
    user = repo.user_by_name(session, name=name.strip())
    if user is None:
        raise AccountError(f"{field}: no user named {name!r}", field=field, status_code=404)
    return user


def project_named(session: Session, name: str, *, field: str = "project") -> Project:
    project = repo.project_by_name(session, name=name.strip())
    if project is None:
        raise AccountError(f"{field}: no project named {name!r}", field=field, status_code=404)
    return project


def project_for_upload(session: Session, principal: Principal, requested: str | None) -> Project:
    """The project a new dataset goes to: `requested` (a project's name or id) if the caller sees it,
    else the caller's only project, else `default` when the caller sees it. Unknown and unseen
    projects get the same answer, so project names do not leak."""
    if requested and requested.strip():
        wanted = requested.strip()
        project = session.get(Project, int(wanted)) if wanted.isdigit() and len(wanted) < 10 else None
        project = project or repo.project_by_name(session, name=wanted)
        if project is None or not principal.sees(project.id):
            raise AccountError(f"project: no project {wanted!r} that you can add datasets to", field="project")
        return project
    visible = repo.list_projects(session, ids=principal.project_ids)
    if len(visible) == 1:
        return visible[0]
    named_default = [p for p in visible if p.name == DEFAULT_PROJECT]
    if named_default:
        return named_default[0]
    if not visible and principal.project_ids is None:
        return default_project(session)  # an admin on a database with no project yet
    if not visible:
        raise AccountError("project: you are a member of no project; ask an administrator", field="project",
                           status_code=403)
    raise AccountError(f"project: you are a member of {len(visible)} projects; name one in the `project` field",
                       field="project")
