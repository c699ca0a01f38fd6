"""the ingest's child rows without foreign keys; a job or dataset's delete removes them by trigger

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01

The ingest writes tens of child rows per event (``lineage_column_lineage``, ``lineage_dataset_fields``,
``lineage_job_datasets``), and each foreign key made PostgreSQL look up and share-lock the parent row
for every one of them: measured, 0.5 of the 0.78 ms of database CPU that storing a new job's event
cost. The merge only writes the ids of jobs and datasets it has locked or created in the same
transaction, and jobs and datasets are deleted only with their organization, so the keys checked
nothing the merge does not already guarantee.

What the keys' ``ON DELETE CASCADE`` did is kept by triggers: deleting jobs or datasets (directly or by
deleting their organization) deletes their child rows. On PostgreSQL one trigger per statement deletes
the children of every deleted parent at once (a transition table), and truncating the jobs or the
datasets (``TRUNCATE organizations CASCADE`` included) empties the child tables, as the keys made
TRUNCATE do; on SQLite, which has neither, one trigger per row. The derived lineage's tables keep their keys: the derivation writes few rows.
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# (table, column, parent table): the foreign keys this revision removes, in PostgreSQL's default names.
_KEYS = (
    ("lineage_column_lineage", "job_id", "lineage_jobs"),
    ("lineage_dataset_fields", "dataset_id", "lineage_datasets"),
    ("lineage_job_datasets", "job_id", "lineage_jobs"),
    ("lineage_job_datasets", "dataset_id", "lineage_datasets"),
)
# SQLite's keys have no names: batch mode recreates the table, naming them with this convention first.
_SQLITE_NAMES = {"fk": "fk_%(table_name)s_%(column_0_name)s"}

_PG_TRIGGERS = """
CREATE FUNCTION lineage_jobs_delete_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lineage_column_lineage WHERE job_id IN (SELECT id FROM deleted_jobs);
    DELETE FROM lineage_job_datasets WHERE job_id IN (SELECT id FROM deleted_jobs);
    RETURN NULL;
END $$;
CREATE TRIGGER lineage_jobs_delete_children AFTER DELETE ON lineage_jobs
    REFERENCING OLD TABLE AS deleted_jobs FOR EACH STATEMENT
    EXECUTE FUNCTION lineage_jobs_delete_children();
CREATE FUNCTION lineage_datasets_delete_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lineage_dataset_fields WHERE dataset_id IN (SELECT id FROM deleted_datasets);
    DELETE FROM lineage_job_datasets WHERE dataset_id IN (SELECT id FROM deleted_datasets);
    RETURN NULL;
END $$;
CREATE TRIGGER lineage_datasets_delete_children AFTER DELETE ON lineage_datasets
    REFERENCING OLD TABLE AS deleted_datasets FOR EACH STATEMENT
    EXECUTE FUNCTION lineage_datasets_delete_children();
CREATE FUNCTION lineage_truncate_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- DELETE, not TRUNCATE: the TRUNCATE that fired this may list these tables too, and a table being
    -- truncated cannot be truncated again inside the same statement.
    DELETE FROM lineage_column_lineage;
    DELETE FROM lineage_job_datasets;
    DELETE FROM lineage_dataset_fields;
    RETURN NULL;
END $$;
CREATE TRIGGER lineage_jobs_truncate_children AFTER TRUNCATE ON lineage_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION lineage_truncate_children();
CREATE TRIGGER lineage_datasets_truncate_children AFTER TRUNCATE ON lineage_datasets
    FOR EACH STATEMENT EXECUTE FUNCTION lineage_truncate_children();
"""
_SQLITE_TRIGGERS = (
    "CREATE TRIGGER lineage_jobs_delete_children AFTER DELETE ON lineage_jobs FOR EACH ROW BEGIN "
    "DELETE FROM lineage_column_lineage WHERE job_id = OLD.id; "
    "DELETE FROM lineage_job_datasets WHERE job_id = OLD.id; END",
    "CREATE TRIGGER lineage_datasets_delete_children AFTER DELETE ON lineage_datasets FOR EACH ROW BEGIN "
    "DELETE FROM lineage_dataset_fields WHERE dataset_id = OLD.id; "
    "DELETE FROM lineage_job_datasets WHERE dataset_id = OLD.id; END",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, column, _parent in _KEYS:
            op.drop_constraint(f"{table}_{column}_fkey", table, type_="foreignkey")
        op.execute(_PG_TRIGGERS)
        return
    for table in sorted({table for table, _column, _parent in _KEYS}):
        with op.batch_alter_table(table, naming_convention=_SQLITE_NAMES) as batch:
            for key_table, column, _parent in _KEYS:
                if key_table == table:
                    batch.drop_constraint(f"fk_{table}_{column}", type_="foreignkey")
    for statement in _SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
        op.execute("DROP TRIGGER lineage_datasets_truncate_children ON lineage_datasets")
        op.execute("DROP TRIGGER lineage_jobs_truncate_children ON lineage_jobs")
        op.execute("DROP FUNCTION lineage_truncate_children()")
        op.execute("DROP TRIGGER lineage_datasets_delete_children ON lineage_datasets")
        op.execute("DROP TRIGGER lineage_jobs_delete_children ON lineage_jobs")
        op.execute("DROP FUNCTION lineage_datasets_delete_children()")
        op.execute("DROP FUNCTION lineage_jobs_delete_children()")
    else:
        op.execute("DROP TRIGGER lineage_datasets_delete_children")
        op.execute("DROP TRIGGER lineage_jobs_delete_children")
    # Rows whose parent is gone (none, unless someone wrote them by hand) would fail the keys.
    for table, column, parent in _KEYS:
        op.execute(f"DELETE FROM {table} WHERE {column} NOT IN (SELECT id FROM {parent})")  # noqa: S608
    for table in sorted({table for table, _column, _parent in _KEYS}):
        with op.batch_alter_table(table) as batch:
            for key_table, column, parent in _KEYS:
                if key_table == table:
                    name = f"{table}_{column}_fkey" if postgresql else f"fk_{table}_{column}"
                    batch.create_foreign_key(name, parent, [column], ["id"], ondelete="CASCADE")
