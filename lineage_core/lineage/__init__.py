"""Each organization's current lineage graph: storage, merge of incoming OpenLineage events, reading.

Modules, one job each:

- :mod:`~lineage_core.lineage.models`: the tables.
- :mod:`~lineage_core.lineage.parse`: check an incoming event; errors name the field.
- :mod:`~lineage_core.lineage.event`: a checked event, reduced to what the store keeps.
- :mod:`~lineage_core.lineage.versions`: which of two states of the same part is the current one.
- :mod:`~lineage_core.lineage.merge`: apply one checked event (the merge rules).
- :mod:`~lineage_core.lineage.statements`: the merge's SQL, built once.
- :mod:`~lineage_core.lineage.ingest`: one event, one transaction, with retries.
- :mod:`~lineage_core.lineage.graph`: stream an organization's graph job by job (the export's input).
- :mod:`~lineage_core.accounts.api_keys`: the ingest API's keys.
- :mod:`~lineage_core.lineage.importer`: import a newline-delimited file of events.
- :mod:`~lineage_core.demo.synthetic`: generate realistic synthetic organizations.
"""
