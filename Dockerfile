# syntax=docker/dockerfile:1.7
#
# airlock images. Build from the repository root:
#
#   docker build --target sandbox -t airlock-sandbox .   # airlockd + git, gh, rg
#   docker build --target proxy   -t airlock-proxy .     # airlock-proxy (mitmproxy)
#   docker build --target orchestrator -t airlock-orchestrator .  # deploy/orchestrator_example.py
#
# Tool versions are pinned by the base image tag and the Debian release; the
# sandbox image records what it actually got as a tooling key in
# /usr/local/share/airlock/tooling-key (the same value `airlockd --tooling-key` prints), which
# image and pod-template caches key on.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LANG=C.UTF-8

# ---------------------------------------------------------------------------
# One wheel of the airlock distribution. airlock/ holds symlinks to daemon/,
# proxy/ and client/; COPY keeps them as links, so the tree builds as in git.
FROM base AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY airlock/ airlock/
COPY daemon/ daemon/
COPY proxy/ proxy/
COPY client/ client/
RUN pip wheel --no-deps --wheel-dir /wheels /src

# One virtualenv per image, each with only its own extra. The wheel is installed
# by file name, never by project name, so no index can substitute another
# distribution called "airlock".
FROM base AS venv-sandbox
COPY --from=wheel /wheels /wheels
RUN python -m venv /opt/airlock \
 && for w in /wheels/airlock-*.whl; do /opt/airlock/bin/pip install "${w}[daemon,types]"; done

FROM base AS venv-proxy
COPY --from=wheel /wheels /wheels
RUN python -m venv /opt/airlock \
 && for w in /wheels/airlock-*.whl; do /opt/airlock/bin/pip install "${w}[proxy]"; done

FROM base AS venv-client
COPY --from=wheel /wheels /wheels
RUN python -m venv /opt/airlock \
 && for w in /wheels/airlock-*.whl; do /opt/airlock/bin/pip install "${w}[client]"; done

# ---------------------------------------------------------------------------
# The sandbox: what an agent's commands run in. The entrypoint starts as root
# only to trust the proxy CA in the system store and to prepare the socket
# directory, then drops to the unprivileged `airlock` user for airlockd (and so
# for every command the agent runs through it). Run it with a non-root
# securityContext and it builds a private CA bundle instead.
FROM base AS sandbox
ARG AIRLOCK_UID=10001
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git gh ripgrep tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid "${AIRLOCK_UID}" airlock \
 && useradd --uid "${AIRLOCK_UID}" --gid "${AIRLOCK_UID}" --create-home \
      --home-dir /home/airlock --shell /bin/sh airlock
COPY --from=venv-sandbox /opt/airlock /opt/airlock
ENV PATH=/opt/airlock/bin:${PATH} \
    AIRLOCK_WORKSPACE=/workspace \
    AIRLOCK_SOCKET_DIR=/run/airlock \
    AIRLOCK_PROXY_CA=/etc/airlock/proxy-ca.pem \
    AIRLOCK_CONTROL=unix:/run/airlock/airlockd.sock \
    GH_NO_UPDATE_NOTIFIER=1 \
    GH_PROMPT_DISABLED=1 \
    GIT_TERMINAL_PROMPT=0
COPY --chmod=0755 deploy/docker/sandbox-entrypoint.sh /usr/local/bin/airlock-sandbox-entrypoint
COPY --chmod=0755 deploy/docker/control-get.py /usr/local/bin/airlock-control-get
RUN ln -s /opt/airlock/bin/airlock-signed-commit /usr/local/bin/gh-signed-commit \
 && mkdir -p /workspace /run/airlock /etc/airlock /usr/local/share/airlock \
 && chown airlock:airlock /workspace /run/airlock \
 && airlockd --tooling-key > /usr/local/share/airlock/tooling-key \
 && python -c 'import json; from airlock.daemon.tooling_key import tooling_manifest; print(json.dumps(tooling_manifest(), indent=2, sort_keys=True))' \
      > /usr/local/share/airlock/tooling-manifest.json \
 && for tool in git gh rg gh-signed-commit airlockd airlock-signed-commit; do \
      command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }; done
WORKDIR /workspace
VOLUME ["/workspace", "/run/airlock"]
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["airlock-control-get", "/v1/health"]
ENTRYPOINT ["tini", "--", "airlock-sandbox-entrypoint"]
# No CMD: with no arguments the entrypoint runs
#   airlockd --workspace $AIRLOCK_WORKSPACE --socket $AIRLOCK_SOCKET_DIR/airlockd.sock

# ---------------------------------------------------------------------------
# The egress proxy. Never root: the state dir (CA key 0600, created at first
# start) is a volume owned by the airlock-proxy user.
FROM base AS proxy
ARG AIRLOCK_PROXY_UID=10002
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid "${AIRLOCK_PROXY_UID}" airlock-proxy \
 && useradd --uid "${AIRLOCK_PROXY_UID}" --gid "${AIRLOCK_PROXY_UID}" --no-create-home \
      --home-dir /var/lib/airlock-proxy --shell /usr/sbin/nologin airlock-proxy
COPY --from=venv-proxy /opt/airlock /opt/airlock
COPY --chmod=0755 deploy/docker/control-get.py /usr/local/bin/airlock-control-get
RUN mkdir -p /var/lib/airlock-proxy /run/airlock-proxy \
 && chown airlock-proxy:airlock-proxy /var/lib/airlock-proxy /run/airlock-proxy \
 && chmod 0700 /var/lib/airlock-proxy \
 && chmod 0750 /run/airlock-proxy
ENV PATH=/opt/airlock/bin:${PATH} \
    HOME=/var/lib/airlock-proxy \
    AIRLOCK_CONTROL=unix:/run/airlock-proxy/control.sock
USER airlock-proxy
VOLUME ["/var/lib/airlock-proxy"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
  CMD ["airlock-control-get", "/v1/health"]
ENTRYPOINT ["tini", "--", "airlock-proxy"]
CMD ["--listen", "0.0.0.0:8080", \
     "--control", "unix:/run/airlock-proxy/control.sock", \
     "--state-dir", "/var/lib/airlock-proxy"]

# ---------------------------------------------------------------------------
# An example orchestrator (airlock.client) that drives one agent turn; see
# deploy/orchestrator_example.py and docs/operations.md.
FROM base AS orchestrator
RUN groupadd --gid 10003 airlock-orchestrator \
 && useradd --uid 10003 --gid 10003 --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin airlock-orchestrator
COPY --from=venv-client /opt/airlock /opt/airlock
COPY deploy/orchestrator_example.py /opt/airlock/orchestrator_example.py
ENV PATH=/opt/airlock/bin:${PATH}
USER airlock-orchestrator
ENTRYPOINT ["python", "/opt/airlock/orchestrator_example.py"]
