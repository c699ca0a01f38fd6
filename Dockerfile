# syntax=docker/dockerfile:1
# The product image: one image, the Procfile's three processes as its entry points.
#
#   web        openlineage-export-web        (the default command)
#   worker     openlineage-export-worker
#   scheduler  openlineage-export-scheduler
#   migration  flask --app portal db upgrade (once, before new tasks start)
#   health     openlineage-export-healthcheck (the worker's container health check)
#
# The web entry point binds gunicorn to 127.0.0.1:$PORTAL_PORT, as the Procfile's web line does; on
# ECS a proxy in the same task (deploy/terraform) takes the load balancer's traffic. The settings are
# the README's configuration table, given as environment variables at run time; none is baked in.
#
# Stages: build the wheel (with its dependencies as wheels), install it into a virtualenv, copy only
# that virtualenv into a slim Python image. The final stage has no compiler, no build backend, no
# source tree, and runs as an unprivileged user.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
# The build reads pyproject.toml, the packages and the role templates their links point at.
COPY pyproject.toml README.md LICENSE ./
COPY lineage_core ./lineage_core
COPY portal ./portal
COPY worker ./worker
COPY cfn_templates ./cfn_templates
COPY terraform ./terraform
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS install
COPY --from=build /wheels /wheels
# Only the wheels just built: nothing is fetched, every version is the one pyproject.toml pins.
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels openlineage-s3-export \
    && /opt/venv/bin/pip uninstall --yes pip \
    && for entry_point in openlineage-export-web openlineage-export-worker openlineage-export-scheduler \
         openlineage-export-healthcheck flask; do test -x "/opt/venv/bin/$entry_point"; done

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="openlineage-s3-export" \
      org.opencontainers.image.description="Exports an organization's OpenLineage lineage into the customer's S3 bucket."
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# An unprivileged user with a fixed numeric ID, so a runtime can verify it is not root.
RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin app
COPY --from=install /opt/venv /opt/venv
WORKDIR /tmp
USER 10001:10001
CMD ["openlineage-export-web"]
