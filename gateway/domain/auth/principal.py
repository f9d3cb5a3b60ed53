"""Who is calling: the principal every request, command and job acts as."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id and name (the actor of audit events), its user's role, and the
    projects it may see. The command line and the demo act as `Principal(None, name)`: an administrator."""

    key_id: int | None
    name: str
    role: str = "admin"
    read_only: bool = False
    project_ids: frozenset[int] | None = None
    """The projects whose datasets (and what derives from them) this caller sees; None: every one (admins)."""
    user_id: int | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def can_write(self) -> bool:
        """Create, run, change, delete: an editor or an admin, with a key that is not read-only."""
        return self.role in ("admin", "editor") and not self.read_only

    @property
    def can_label(self) -> bool:
        """Label notes of a concept, ask its queue, retrain it: a labeller, an editor or an admin (not read-only)."""
        return self.role in ("admin", "editor", "labeller") and not self.read_only

    def sees(self, project_id: int | None) -> bool:
        return self.project_ids is None or project_id in self.project_ids
