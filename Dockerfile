# syntax=docker/dockerfile:1
# ckpt-action container image: the ckpt-action CLI on Debian slim.
#
#   docker build -t ckpt-action .
#   docker run --rm ckpt-action --help
#   docker run --rm -e HF_TOKEN -v "$PWD/ckpt:/data" ckpt-action push --repo ORG/NAME --local-dir /data
#
# Behind a TLS-intercepting proxy, hand pip the proxy's CA bundle as a build secret:
#   docker build --secret id=extra_ca,src=/etc/ssl/certs/ca-certificates.crt .
# The published build pins the base by digest (multi-arch index); a local build
# may substitute its own base: --build-arg BASE_IMAGE=debian:bookworm-slim
ARG BASE_IMAGE=debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

# ---- build stage: a virtualenv filled from the hash-pinned lock ----------------
FROM ${BASE_IMAGE} AS build
# Debian's own python3 (3.11 on bookworm) is what the lock targets.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
COPY requirements.lock /tmp/requirements.lock
# The extra_ca secret is optional: without it pip uses its own certifi bundle.
RUN --mount=type=secret,id=extra_ca,required=false \
    if [ -s /run/secrets/extra_ca ]; then export PIP_CERT=/run/secrets/extra_ca; fi \
 && python3 -m venv --without-pip /opt/ckpt-action \
 && python3 -m venv /tmp/pipenv \
 && /tmp/pipenv/bin/pip --python /opt/ckpt-action/bin/python install \
      --disable-pip-version-check --no-cache-dir --no-compile --no-deps \
      --require-hashes --only-binary=:all: -r /tmp/requirements.lock \
 && python3 -m compileall -q -j 0 /opt/ckpt-action/lib

# ---- runtime stage --------------------------------------------------------------
FROM ${BASE_IMAGE}
ARG VERSION=0.0.0-dev
ARG REVISION=unknown
ARG SOURCE=https://github.com/OWNER/ckpt-action
LABEL org.opencontainers.image.title="ckpt-action" \
      org.opencontainers.image.description="Move training checkpoints between CI jobs and a Hugging Face Hub repo, pinned to commit SHAs." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-minimal libpython3.11-stdlib ca-certificates \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/log/* \
 && useradd --uid 10001 --user-group --create-home --home-dir /home/ckpt --shell /usr/sbin/nologin ckpt
COPY --from=build /opt/ckpt-action /opt/ckpt-action
# Not the local Hub (packages/ckpt-localhub): the image runs no demo and serves nothing, so it
# carries no server (`ckpt-action demo` in it says what to install).
# The package goes where pip would put it, with the console script pip would write for
# [project.scripts] (ckpt-action = ckpt_action.cli.app:console): `ckpt-action` is on PATH for CI
# systems that run a script in the image (GitLab CI), and it is the entrypoint.
COPY ckpt_action /opt/ckpt-action/lib/python3.11/site-packages/ckpt_action
RUN python3 -m compileall -q /opt/ckpt-action/lib/python3.11/site-packages/ckpt_action \
 && printf '#!/opt/ckpt-action/bin/python\nimport sys\nfrom ckpt_action.cli.app import console\nsys.exit(console())\n' \
      > /opt/ckpt-action/bin/ckpt-action \
 && chmod 0755 /opt/ckpt-action/bin/ckpt-action
# Any --user works: caches live under /tmp, so `docker run --user "$(id -u):$(id -g)"`
# can write pulled checkpoints into a bind mount owned by the caller.
ENV PATH=/opt/ckpt-action/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HOME=/tmp/.cache/huggingface \
    HF_HUB_DISABLE_TELEMETRY=1 \
    WANDB_DIR=/tmp \
    XDG_CACHE_HOME=/tmp/.cache
USER 10001:10001
WORKDIR /data
ENTRYPOINT ["ckpt-action"]
CMD ["--help"]
