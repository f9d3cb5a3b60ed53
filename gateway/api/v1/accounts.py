"""/api/v1/users, /api/v1/projects (administrators: `gateway.authz`) and /api/v1/me (anyone with a key)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from sqlalchemy.orm import Session

from contracts.catalog import ErrorOut, Me, MemberAdd, ProjectCreate, ProjectOut, UserCreate, UserOut
from gateway.deps import CurrentKey, RequestId, SessionDep
from gateway.domain.auth import accounts, repo
from gateway.domain.auth.models import Project, User
from gateway.domain.auth.service import audit

router = APIRouter(tags=["users and projects"])
ERRORS = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}, 422: {"model": ErrorOut}}


def user_out(session: Session, user: User) -> UserOut:
    names = [p.name for p in repo.list_projects(session, ids=frozenset(repo.project_ids_of(session, user_id=user.id)))]
    return UserOut(id=user.id, name=user.name, role=user.role, created_at=user.created_at, projects=names)


def project_out(session: Session, project: Project) -> ProjectOut:
    return ProjectOut(id=project.id, name=project.name, created_at=project.created_at,
                      members=[u.name for u in repo.members_of(session, project_id=project.id)])


def valid_project(project_id: int, session: Session) -> Project:
    project = session.get(Project, project_id)
    if project is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"project {project_id} not found")
    return project


@router.get("/me", response_model=Me)
def me(session: SessionDep, principal: CurrentKey) -> Me:
    """Who the key is: its user, role, whether it is read-only, and the projects it sees."""
    user = session.get(User, principal.user_id) if principal.user_id is not None else None
    return Me(key_name=principal.name, user=user.name if user else None, role=principal.role,
              read_only=principal.read_only,
              projects=[project_out(session, p) for p in repo.list_projects(session, ids=principal.project_ids)])


@router.get("/users", response_model=list[UserOut])
def list_users(session: SessionDep, _: CurrentKey) -> list[UserOut]:
    return [user_out(session, u) for u in repo.list_users(session)]


@router.post("/users", response_model=UserOut, status_code=status.HTTP_201_CREATED, responses=ERRORS)
def new_user(body: UserCreate, session: SessionDep, principal: CurrentKey, rid: RequestId) -> UserOut:
    user = accounts.create_user(session, name=body.name, role=body.role)
    audit(session, principal, "user.create", target_type="user", target_id=user.id, request_id=rid,
          details={"role": user.role})
    return user_out(session, user)


@router.get("/projects", response_model=list[ProjectOut])
def list_projects(session: SessionDep, _: CurrentKey) -> list[ProjectOut]:
    return [project_out(session, p) for p in repo.list_projects(session)]


@router.post("/projects", response_model=ProjectOut, status_code=status.HTTP_201_CREATED, responses=ERRORS)
def new_project(body: ProjectCreate, session: SessionDep, principal: CurrentKey, rid: RequestId) -> ProjectOut:
    project = accounts.create_project(session, name=body.name)
    audit(session, principal, "project.create", target_type="project", target_id=project.id, request_id=rid)
    return project_out(session, project)


@router.post("/projects/{project_id}/members", response_model=ProjectOut, responses=ERRORS)
def add_member(project_id: int, body: MemberAdd, session: SessionDep, principal: CurrentKey,
               rid: RequestId) -> ProjectOut:
    """Make a user a member of the project (its datasets, and what derives from them, become theirs to
    see, and to change if they are an editor). Adding a member twice is no error."""
    project = valid_project(project_id, session)
    user = accounts.user_named(session, body.user)
    repo.add_membership(session, user_id=user.id, project_id=project.id)
    audit(session, principal, "project.member_add", target_type="project", target_id=project.id, request_id=rid,
          details={"user_id": user.id})
    return project_out(session, project)


@router.delete("/projects/{project_id}/members/{user_id}", response_model=ProjectOut, responses=ERRORS)
def remove_member(project_id: int, user_id: int, session: SessionDep, principal: CurrentKey,
                  rid: RequestId) -> ProjectOut:
    project = valid_project(project_id, session)
    if not repo.remove_membership(session, user_id=user_id, project_id=project.id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"user {user_id} is not a member of project {project_id}")
    audit(session, principal, "project.member_remove", target_type="project", target_id=project.id, request_id=rid,
          details={"user_id": user_id})
    return project_out(session, project)
