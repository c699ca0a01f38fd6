"""``openlineage-export-web``'s gunicorn options: gthread workers, their threads, bad values refused."""

from __future__ import annotations

import pytest

from lineage_core.infra.config import ConfigError
from portal.serve import gunicorn_options


def test_the_defaults_are_two_workers_of_four_threads_on_loopback() -> None:
    options = gunicorn_options({})
    assert options["bind"] == ["127.0.0.1:8000"]
    assert (options["workers"], options["worker_class"], options["threads"]) == (2, "gthread", 4)


def test_threads_come_from_web_threads() -> None:
    assert gunicorn_options({"WEB_THREADS": "16", "WEB_CONCURRENCY": "3"})["threads"] == 16


@pytest.mark.parametrize("value", ["0", "65", "four", "-1", "2.5", "\u0663", "\uff13"])
def test_a_bad_web_threads_names_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="WEB_THREADS must be a whole number from 1 to 64"):
        gunicorn_options({"WEB_THREADS": value})


@pytest.mark.parametrize("name", ["PORTAL_PORT", "WEB_CONCURRENCY"])
def test_digits_of_other_scripts_are_refused(name: str) -> None:
    # ARABIC-INDIC DIGIT THREE and FULLWIDTH DIGIT THREE pass str.isdigit() and int() reads them as 3.
    for value in ("\u0663", "\uff13"):
        with pytest.raises(ConfigError, match=f"{name} must be a whole number"):
            gunicorn_options({name: value})
