"""Organizations: the tenants. Every connector, key and lineage row belongs to exactly one."""

from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from lineage_core.accounts.errors import AccountError
from lineage_core.infra.models import Organization

_SLUG = re.compile(r"\A[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?\Z", re.ASCII)


def create_organization(session: Session, slug: str, name: str | None = None) -> Organization:
    if not _SLUG.fullmatch(slug):
        raise AccountError(
            f"Organization slug {slug!r} must be 1-64 lowercase letters, digits or '-', "
            "starting and ending with a letter or digit."
        )
    if session.scalar(select(Organization).where(Organization.slug == slug)) is not None:
        raise AccountError(f"Organization {slug!r} already exists.")
    org = Organization(slug=slug, name=name or slug)
    session.add(org)
    session.flush()
    return org


def get_organization(session: Session, slug: str) -> Organization:
    org = session.scalar(select(Organization).where(Organization.slug == slug))
    if org is None:
        raise AccountError(f"No organization {slug!r}.")
    return org
