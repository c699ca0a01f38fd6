"""Settings never show their secrets: not in repr, str or an error report (finding 7 of the abuse review)."""

from __future__ import annotations

import traceback

from lineage_core.infra.config import Settings

SECRET_KEY = "signing-key-0123456789abcdef"
METRICS_TOKEN = "metrics-token-0123456789"
DB_PASSWORD = "db-pa55word-xyz"
REDIS_PASSWORD = "redis-pa55word-xyz"
ENV = {
    "SECRET_KEY": SECRET_KEY,
    "VENDOR_AWS_ACCOUNT_ID": "123456789012",
    "METRICS_TOKEN": METRICS_TOKEN,
    "DATABASE_URL": f"postgresql://portal:{DB_PASSWORD}@db.internal:5432/portal",
    "REDIS_URL": f"redis://:{REDIS_PASSWORD}@cache.internal:6379/0",
}
SECRETS = (SECRET_KEY, METRICS_TOKEN, DB_PASSWORD, REDIS_PASSWORD)


def test_repr_and_str_hide_secrets_and_url_passwords() -> None:
    settings = Settings.from_env(ENV)
    for text in (repr(settings), str(settings), f"{settings}", f"{settings!r}", repr([settings])):
        for secret in SECRETS:
            assert secret not in text, text
    text = repr(settings)
    assert "secret_key='***'" in text and "metrics_token='***'" in text
    assert "postgresql+psycopg://portal:***@db.internal:5432/portal" in text
    assert "redis://:***@cache.internal:6379/0" in text
    assert "vendor_account_id='123456789012'" in text
    # The values themselves are intact.
    assert settings.secret_key == SECRET_KEY and DB_PASSWORD in settings.database_url


def test_an_error_report_with_local_variables_shows_no_secret() -> None:
    def fails(settings: Settings) -> None:
        raise RuntimeError("boom")

    try:
        fails(Settings.from_env(ENV))
    except RuntimeError as error:
        report = "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())
    assert "settings = Settings(" in report
    for secret in SECRETS:
        assert secret not in report
