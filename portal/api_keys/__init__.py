"""Portal pages where org admins create, list and revoke the ingest API's keys."""
