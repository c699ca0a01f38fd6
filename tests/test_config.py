import pytest

from lineage_core.infra.config import ConfigError, Settings

GOOD = {"SECRET_KEY": "s" * 32, "VENDOR_AWS_ACCOUNT_ID": "123456789012"}


def test_defaults_are_the_embedded_ones() -> None:
    settings = Settings.from_env(GOOD)
    assert settings.database_url == "sqlite:///instance/portal.db"
    assert settings.redis_url == "redis://127.0.0.1:6379/0"
    assert settings.aws_endpoint_url is None
    assert settings.require_external_id_enforcement is True
    assert settings.local_mode is False


def test_postgres_url_gets_the_psycopg_driver() -> None:
    settings = Settings.from_env({**GOOD, "DATABASE_URL": "postgresql://u:p@db/x"})
    assert settings.database_url == "postgresql+psycopg://u:p@db/x"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"VENDOR_AWS_ACCOUNT_ID": "123456789012"}, "SECRET_KEY"),
        ({**GOOD, "SECRET_KEY": "short"}, "SECRET_KEY"),
        ({"SECRET_KEY": "s" * 32}, "VENDOR_AWS_ACCOUNT_ID"),
        ({**GOOD, "VENDOR_AWS_ACCOUNT_ID": "12345678901"}, "VENDOR_AWS_ACCOUNT_ID"),
        ({**GOOD, "AWS_ENDPOINT_URL": "localhost:5000"}, "AWS_ENDPOINT_URL"),
        ({**GOOD, "DATABASE_URL": "mysql://x/y"}, "DATABASE_URL"),
        ({**GOOD, "REDIS_URL": "http://x"}, "REDIS_URL"),
        ({**GOOD, "REQUIRE_EXTERNAL_ID_ENFORCEMENT": "maybe"}, "REQUIRE_EXTERNAL_ID_ENFORCEMENT"),
        ({**GOOD, "LOCAL_MODE": "2"}, "LOCAL_MODE"),
        ({**GOOD, "EXPORT_QUEUE": "exports:high"}, "EXPORT_QUEUE"),
        ({**GOOD, "LINEAGE_MAX_EVENT_BYTES": str(6 * 1024 * 1024)}, "LINEAGE_MAX_EVENT_BYTES"),
        ({**GOOD, "LINEAGE_BATCH_MAX_EVENTS": "0"}, "LINEAGE_BATCH_MAX_EVENTS"),
        ({**GOOD, "LINEAGE_BATCH_MAX_EVENTS": "1e3"}, "LINEAGE_BATCH_MAX_EVENTS"),
        ({**GOOD, "LINEAGE_BATCH_MAX_BYTES": "\uff11\uff10\uff12\uff14"}, "LINEAGE_BATCH_MAX_BYTES"),
        ({**GOOD, "LINEAGE_BATCH_MAX_BYTES": "16 MiB"}, "LINEAGE_BATCH_MAX_BYTES"),
        ({**GOOD, "LINEAGE_BATCH_CONCURRENCY": "0"}, "LINEAGE_BATCH_CONCURRENCY"),
        ({**GOOD, "LINEAGE_BATCH_CONCURRENCY": "65"}, "LINEAGE_BATCH_CONCURRENCY"),
    ],
)
def test_bad_settings_stop_start_up_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_a_password_in_a_bad_url_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({**GOOD, "DATABASE_URL": "mysql://user:hunter2@db/x"})
    assert "hunter2" not in str(info.value)


def test_ingest_bounds_come_from_the_environment() -> None:
    defaults = Settings.from_env(GOOD)
    assert (defaults.lineage_max_event_bytes, defaults.lineage_batch_max_events) == (5 * 1024 * 1024, 1000)
    assert (defaults.lineage_batch_max_bytes, defaults.lineage_batch_concurrency) == (16 * 1024 * 1024, 2)
    settings = Settings.from_env(
        {
            **GOOD,
            "LINEAGE_MAX_EVENT_BYTES": "307200",
            "LINEAGE_BATCH_MAX_EVENTS": "250",
            "LINEAGE_BATCH_MAX_BYTES": "4194304",
            "LINEAGE_BATCH_CONCURRENCY": "3",
        }
    )
    assert (settings.lineage_max_event_bytes, settings.lineage_batch_max_events) == (307200, 250)
    assert (settings.lineage_batch_max_bytes, settings.lineage_batch_concurrency) == (4194304, 3)
