"""The built wheel runs the product on its own, without the checkout.

The wheel is built from a copy of the checkout's files (what git tracks or would track), installed
``--no-deps`` into a new venv that sees the dev venv's site-packages for the dependencies through a
``.pth`` path line. Such a line adds the folder to ``sys.path`` but does not run the ``.pth`` files in
it, so the editable install's finder (``__editable__*``) never loads and the checkout stays invisible:
the ``installed`` fixture proves it before the wheel goes in. Every command runs from a
folder outside the checkout. No network: ``--no-build-isolation --no-index`` builds with this venv's
setuptools.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parent.parent
# What the build reads: the packages, the folders role_templates/ links to, and the top-level files.
BUILD_INPUTS = ("lineage_core", "portal", "worker", "cfn_templates", "terraform")
ROLE_TEMPLATES = "lineage_core/setup/role_templates"
PIP = (sys.executable, "-m", "pip")
INSTALL_OPTIONS = ("--quiet", "--no-deps", "--no-index", "--ignore-installed", "--no-warn-script-location")
ENTRY_POINTS = {
    "openlineage-export-web": "web",
    "openlineage-export-worker": "worker",
    "openlineage-export-scheduler": "scheduler",
    "openlineage-export-healthcheck": "healthcheck",
}
PRODUCT_ENV = {
    "SECRET_KEY": "wheel-test-secret-key-not-for-production",
    "VENDOR_AWS_ACCOUNT_ID": "123456789012",
}


@dataclass(frozen=True)
class Installed:
    source: Path  # the copy the wheel was built from
    wheel: Path
    venv: Path
    site_packages: Path
    outside: Path  # a working folder outside the checkout

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _checkout_files() -> list[str]:
    """The build inputs git tracks or would track (not ignored), as paths relative to the checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=CHECKOUT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted(
        {
            name
            for name in listed.split("\0")
            if name
            and ("/" not in name or name.split("/", 1)[0] in BUILD_INPUTS)
            and os.path.lexists(CHECKOUT / name)  # deleted in the work tree, not yet in a commit
        }
    )


def _copy_checkout(destination: Path) -> None:
    for name in _checkout_files():
        source, target = CHECKOUT / name, destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))  # role_templates/: relative links, kept as links
        else:
            shutil.copy2(source, target)


def _call(args: list[str], cwd: Path) -> str:
    """Run ``args``; their output when they succeed, a failure showing it when they do not."""
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return result.stdout


def _env(installed: Installed, **extra: str) -> dict[str, str]:
    """A minimal environment: no PYTHONPATH, no FLASK_APP, the clean venv's bin/ first."""
    env = {name: os.environ[name] for name in ("HOME", "LANG", "TMPDIR") if name in os.environ}
    env.update(PATH=f"{installed.venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin", PYTHONNOUSERSITE="1")
    env.update(extra)
    return env


def _run(installed: Installed, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = installed.outside / "script.py"
    script.write_text(textwrap.dedent(code), encoding="utf-8")
    return subprocess.run(
        [str(installed.python), str(script), *args],
        cwd=installed.outside,
        env=_env(installed),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel, built from a copy of the checkout, and a clean venv that has the dependencies only."""
    root = tmp_path_factory.mktemp("wheel")
    source, dist, venv, outside = root / "source", root / "dist", root / "venv", root / "outside"
    outside.mkdir()
    _copy_checkout(source)
    _call(
        [
            *PIP,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "-w",
            str(dist),
            str(source),
        ],
        outside,
    )
    (wheel,) = dist.glob("openlineage_s3_export-*.whl")

    # Without pip: this venv's pip installs into it (--python), so it needs none of its own.
    _call([sys.executable, "-m", "venv", "--without-pip", str(venv)], outside)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site_packages = Path(_call([str(venv / "bin" / "python"), "-c", purelib], outside).strip())
    dev_paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site_packages / "dev-dependencies.pth").write_text(
        "".join(f"{p}\n" for p in dev_paths), encoding="utf-8"
    )
    return Installed(source=source, wheel=wheel, venv=venv, site_packages=site_packages, outside=outside)


@pytest.fixture(scope="module")
def installed(built: Installed) -> Installed:
    """``built`` with the wheel installed (after the checkout was shown invisible)."""
    _prove_the_checkout_invisible(built)
    # --ignore-installed: the dev venv's editable install is on the path; leave it alone.
    _call([*PIP, "--python", str(built.python), "install", *INSTALL_OPTIONS, str(built.wheel)], built.outside)
    return built


def _prove_the_checkout_invisible(built: Installed) -> None:
    result = _run(
        built,
        """
        import importlib, json, sys
        found = {}
        for name in ("lineage_core", "portal", "worker", "tests", "flask", "sqlalchemy"):
            try:
                found[name] = importlib.import_module(name).__file__
            except ModuleNotFoundError:
                found[name] = None
        finders = [repr(finder) for finder in sys.meta_path if "editable" in repr(finder).lower()]
        print(json.dumps({"found": found, "finders": finders}))
        """,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    dev_site_packages = sysconfig.get_paths()["purelib"]
    # The dependencies come from the dev venv...
    assert report["found"]["flask"].startswith(dev_site_packages), report
    assert report["found"]["sqlalchemy"].startswith(dev_site_packages), report
    # ...but nothing of the checkout: no editable finder, no package of ours, not even tests/.
    assert report["finders"] == [], report
    for name in ("lineage_core", "portal", "worker", "tests"):
        assert report["found"][name] is None, (name, report)


def _expected_in_wheel(source: Path) -> set[str]:
    """Every module of the three packages, and every file the product reads at run time."""
    expected = {
        path.relative_to(source).as_posix()
        for package in ("lineage_core", "portal", "worker")
        for path in (source / package).rglob("*.py")
        if not path.relative_to(source).as_posix().startswith(ROLE_TEMPLATES)
    }
    expected |= {f"{package}/py.typed" for package in ("lineage_core", "portal", "worker")}
    expected |= {p.relative_to(source).as_posix() for p in (source / "portal" / "templates").rglob("*.html")}
    expected |= {
        p.relative_to(source).as_posix() for p in (source / "portal" / "static").rglob("*") if p.is_file()
    }
    expected.add("lineage_core/infra/migrations/script.py.mako")
    # The role templates, from the folders the links in role_templates/ point to.
    expected |= {
        f"{ROLE_TEMPLATES}/cloudformation/{p.name}" for p in (source / "cfn_templates").glob("*.yaml")
    }
    expected |= {
        f"{ROLE_TEMPLATES}/terraform/{p.relative_to(source / 'terraform').as_posix()}"
        for p in (source / "terraform").rglob("*")
        if p.suffix in {".tf", ".md"} and not any(part.startswith(".") for part in p.parts)
    }
    return expected


def test_the_wheel_carries_every_module_template_migration_and_role_template(built: Installed) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        console_scripts = wheel.read(entry_points).decode()
    expected = _expected_in_wheel(built.source)
    assert len(expected) > 100
    assert {
        "portal/templates/auth/login.html",
        "lineage_core/infra/migrations/env.py",
        f"{ROLE_TEMPLATES}/cloudformation/openlineage-export-role.yaml",
        f"{ROLE_TEMPLATES}/terraform/main.tf",
        f"{ROLE_TEMPLATES}/terraform/modules/policies/main.tf",
    } <= expected
    assert sorted(expected - names) == []
    # Nothing of the checkout's other folders, and no symlink stand-ins.
    assert not [n for n in names if n.startswith(("tests/", "bench/", "scripts/", "cfn_templates/"))]
    for script in ENTRY_POINTS:
        assert f"{script} = " in console_scripts


PRODUCT_SCRIPT = """
import importlib, io, json, sys, zipfile
from pathlib import Path

site_packages = Path(sys.argv[1]).resolve()
workdir = Path(sys.argv[2])
expected_module_files = set(json.loads(sys.argv[3]))

# Our three packages come from the wheel, and so do the files they read.
for name in ("lineage_core", "portal", "worker"):
    module = importlib.import_module(name)
    assert Path(module.__file__).resolve().is_relative_to(site_packages), (name, module.__file__)
assert not [f for f in sys.meta_path if "editable" in repr(f).lower()], sys.meta_path

from lineage_core.setup import cloudformation, terraform_bundle
assert cloudformation.TEMPLATE_PATH.is_relative_to(site_packages), cloudformation.TEMPLATE_PATH
assert terraform_bundle.MODULE_DIR.is_relative_to(site_packages), terraform_bundle.MODULE_DIR

import yaml
from lineage_core.accounts import users
from lineage_core.accounts.organizations import create_organization
from lineage_core.accounts.users import create_user
from lineage_core.infra import migrate
from lineage_core.infra.config import Settings
from lineage_core.infra.db import session_factory
from lineage_core.infra.models import Role
from lineage_core.setup.connectors import ConnectorSettings, apply_settings, create_draft
from portal import create_app

users.PASSWORD_HASH_METHOD = "pbkdf2:sha256:1000"  # hashing strength is not what this is about
PASSWORD = "correct horse battery staple"
database_url = f"sqlite:///{workdir / 'portal.db'}"
migrate.upgrade(database_url)  # the wheel's migrations

session = session_factory(database_url)()
organization = create_organization(session, "wheel", "Wheel Corp")
create_user(session, "admin@wheel.test", PASSWORD, Role.ORG_ADMIN, organization)
connector = create_draft(session, organization.id)
apply_settings(
    connector,
    ConnectorSettings(
        bucket="wheel-lineage-export",
        prefix="lineage/openlineage",
        account_id="210987654321",
        role_name="FoundationalLineageExport",
        role_path="/",
        interval_days=14,
        kms_key_arn=None,
        permissions_boundary_arn=None,
    ),
)
session.commit()
connector_id, external_id = connector.id, connector.external_id
assert connector.settings_complete
session.close()

settings = Settings(
    database_url=database_url,
    redis_url="redis://127.0.0.1:1/0",  # nothing listens there: none of these pages needs Redis
    secret_key="wheel-test-secret-key-not-for-production",
    vendor_account_id="123456789012",
    aws_endpoint_url=None,
    aws_region="us-east-1",
    require_external_id_enforcement=True,
    export_queue="exports",
    local_mode=False,
)
app = create_app(test_config={"TESTING": True, "WTF_CSRF_ENABLED": False}, settings=settings)
assert Path(app.root_path).resolve().is_relative_to(site_packages), app.root_path
client = app.test_client()

login_page = client.get("/login")
assert login_page.status_code == 200, login_page.status_code
html = login_page.get_data(as_text=True)
assert 'name="email"' in html and 'name="password"' in html, html
assert "/static/style.css" in html, html
assert client.get("/static/style.css").status_code == 200

signed_in = client.post("/login", data={"email": "admin@wheel.test", "password": PASSWORD})
assert signed_in.status_code == 302, signed_in.get_data(as_text=True)

template = client.get(f"/integrations/openlineage/{connector_id}/template.yaml")
assert template.status_code == 200, template.status_code
assert template.mimetype == "application/x-yaml"
parameters = yaml.safe_load(template.get_data(as_text=True))["Parameters"]
assert parameters["ExternalId"]["Default"] == external_id
assert parameters["BucketName"]["Default"] == "wheel-lineage-export"

bundle = client.get(f"/integrations/openlineage/{connector_id}/terraform.zip")
assert bundle.status_code == 200, bundle.status_code
with zipfile.ZipFile(io.BytesIO(bundle.get_data())) as archive:
    names = archive.namelist()
    (main_tf,) = [n for n in names if n.count("/") == 1 and n.endswith("/main.tf")]
    folder = main_tf.split("/")[0]
    assert external_id in archive.read(main_tf).decode()
module_prefix = f"{folder}/{terraform_bundle.MODULE_SOURCE.removeprefix('./')}/"
module_files = {n.removeprefix(module_prefix) for n in names if n.startswith(module_prefix)}
assert module_files == expected_module_files, sorted(module_files ^ expected_module_files)
assert f"{folder}/README.md" in names

print(json.dumps({"connector": connector_id, "zip_files": len(names)}))
"""


def test_the_installed_wheel_runs_the_product(installed: Installed) -> None:
    terraform = installed.source / "terraform"
    module_files = sorted(
        p.relative_to(terraform).as_posix()
        for p in terraform.rglob("*")
        if p.suffix in {".tf", ".md"} and not any(part.startswith(".") for part in p.parts)
    )
    workdir = installed.outside / "product"
    workdir.mkdir()
    result = _run(
        installed, PRODUCT_SCRIPT, str(installed.site_packages), str(workdir), json.dumps(module_files)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["zip_files"] == len(module_files) + 2


def test_each_entry_point_starts_its_process_and_names_a_missing_setting(installed: Installed) -> None:
    for script, process in ENTRY_POINTS.items():
        path = installed.venv / "bin" / script
        assert path.is_file(), path
        # No SECRET_KEY: each process stops at start with a line naming it, as the README promises.
        result = subprocess.run(
            [str(path)],
            cwd=installed.outside,
            env=_env(installed),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, (script, result.returncode, result.stderr)
        assert result.stderr.strip().startswith(f"{process}: SECRET_KEY must be set"), (script, result.stderr)

    bad_port = subprocess.run(
        [str(installed.venv / "bin" / "openlineage-export-web")],
        cwd=installed.outside,
        env=_env(installed, **PRODUCT_ENV, PORTAL_PORT="80a"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad_port.returncode == 2
    assert bad_port.stderr.strip() == "web: PORTAL_PORT must be a whole number from 1 to 65535; got '80a'."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_openlineage_export_web_serves_the_portal(installed: Installed) -> None:
    port = _free_port()
    log = installed.outside / "web.log"
    env = _env(
        installed,
        **PRODUCT_ENV,
        PORTAL_PORT=str(port),
        WEB_CONCURRENCY="1",
        DATABASE_URL=f"sqlite:///{installed.outside / 'web.db'}",
    )
    with log.open("wb") as output:
        web = subprocess.Popen(
            [str(installed.venv / "bin" / "openlineage-export-web")],
            cwd=installed.outside,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        body = _get_when_up(f"http://127.0.0.1:{port}/login", web, log)
        assert 'name="password"' in body
        # The API's OpenAPI document ships in the wheel (portal/api/openapi.py) and is served from it.
        document = json.loads(_get_when_up(f"http://127.0.0.1:{port}/api/v1/openapi.json", web, log))
        assert document["openapi"] == "3.1.0" and "/api/v1/connections" in document["paths"]
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=30)
    text = log.read_text(errors="replace")
    assert f"Listening at: http://127.0.0.1:{port}" in text, text
    assert '"GET /login HTTP/1.1" 200' in text, text  # the access log, on standard output


def _get_when_up(url: str, process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            pytest.fail(f"openlineage-export-web exited with {process.returncode}: {log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (a local http URL)
                assert response.status == 200
                body: str = response.read().decode()
                return body
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                pytest.fail(f"openlineage-export-web did not answer in 30 s: {log.read_text()}")
            time.sleep(0.2)
