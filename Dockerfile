#
# airlock images. Build from the repository root (`make images` does all of it):
#
#   docker build --target sandbox      -t airlock-sandbox .       # airlockd + git, gh, rg
#   docker build --target proxy        -t airlock-proxy .         # airlock-proxy (mitmproxy)
#   docker build --target orchestrator -t airlock-orchestrator .  # deploy/orchestrator_example.py
#   docker build --target redis        -t airlock-redis .         # Debian's redis-server
#
# Offline / mirror-only sites: no remote `# syntax` frontend and no BuildKit-only
# instruction is used, so Debian's docker.io builds this with or without
# BuildKit; `scripts/base-image.sh` builds the base from Debian packages and
# `--build-arg PYTHON_IMAGE=airlock-base:bookworm` uses it (what `make images` does).
#
# Python dependencies come only from the hash-pinned lock files in requirements/
# (`make lock` regenerates them); pip refuses any file whose hash is not there.
# The sandbox image records what it got as a tooling key in
# /usr/local/share/airlock/tooling-key (the value `airlockd --tooling-key`
# prints), which image and pod-template caches key on.

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
# The build backend itself is pinned and hashed like everything else.
FROM base AS wheel
WORKDIR /src
COPY requirements/build.lock /src/requirements/build.lock
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --no-deps -r /src/requirements/build.lock
COPY pyproject.toml README.md ./
COPY airlock/ airlock/
COPY daemon/ daemon/
COPY proxy/ proxy/
COPY client/ client/
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels /src

# One virtualenv per image, each with only its own extra's locked dependencies.
# The lock is installed first (its own layer: a change to airlock's code does
# not reinstall the dependencies), then the wheel by file name with --no-deps,
# never by project name, so no index can substitute another "airlock".
FROM base AS venv-sandbox
# "sandbox" (airlockd) or "sandbox-types" (airlockd + basedpyright, ~200 MB more).
ARG AIRLOCK_SANDBOX_LOCK=sandbox
COPY requirements/sandbox.lock requirements/sandbox-types.lock /requirements/
RUN python -m venv /opt/airlock \
 && /opt/airlock/bin/pip install --require-hashes --no-deps -r "/requirements/${AIRLOCK_SANDBOX_LOCK}.lock"
COPY --from=wheel /wheels /wheels
RUN for w in /wheels/airlock-*.whl; do /opt/airlock/bin/pip install --no-deps "${w}"; done \
 && /opt/airlock/bin/pip check

FROM base AS venv-proxy
COPY requirements/proxy.lock /requirements/proxy.lock
RUN python -m venv /opt/airlock \
 && /opt/airlock/bin/pip install --require-hashes --no-deps -r /requirements/proxy.lock
COPY --from=wheel /wheels /wheels
RUN for w in /wheels/airlock-*.whl; do /opt/airlock/bin/pip install --no-deps "${w}"; done \
 && /opt/airlock/bin/pip check

FROM base AS venv-client
COPY requirements/client.lock /requirements/client.lock
RUN python -m venv /opt/airlock \
 && /opt/airlock/bin/pip install --require-hashes --no-deps -r /requirements/client.lock
COPY --from=wheel /wheels /wheels
RUN for w in /wheels/airlock-*.whl; do /opt/airlock/bin/pip install --no-deps "${w}"; done \
 && /opt/airlock/bin/pip check

# ---------------------------------------------------------------------------
# The sandbox: what an agent's commands run in. Two users: `airlock` owns the
# socket directory, `agent` (AIRLOCK_EXEC_USER) is who every command the agent
# runs through airlockd runs as (`airlockd --exec-user agent`), and owns the
# workspace (group airlock, setgid, group-writable: the daemon edits it too). The entrypoint starts as root to trust the proxy CA in the system
# store and to prepare the socket directory; airlockd keeps root only to switch
# to the exec user (its token, journals and artifacts are unreadable to it).
# Node and TypeScript are optional (build arg AIRLOCK_SANDBOX_TYPESCRIPT=VERSION
# installs Debian's nodejs and that typescript from npm), so the default image
# stays small.
FROM base AS sandbox
ARG AIRLOCK_UID=10001
ARG AIRLOCK_AGENT_UID=10010
ARG AIRLOCK_SANDBOX_TYPESCRIPT=
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git gh ripgrep tini \
 && if [ -n "${AIRLOCK_SANDBOX_TYPESCRIPT}" ]; then \
      apt-get install -y --no-install-recommends nodejs npm \
      && npm install -g --no-fund --no-audit --prefix /opt/typescript "typescript@${AIRLOCK_SANDBOX_TYPESCRIPT}" \
      && apt-get purge -y npm && apt-get autoremove -y; \
    fi \
 && rm -rf /var/lib/apt/lists/* /root/.npm \
 && groupadd --gid "${AIRLOCK_UID}" airlock \
 && useradd --uid "${AIRLOCK_UID}" --gid "${AIRLOCK_UID}" --create-home \
      --home-dir /home/airlock --shell /bin/sh airlock \
 && groupadd --gid "${AIRLOCK_AGENT_UID}" agent \
 && useradd --uid "${AIRLOCK_AGENT_UID}" --gid "${AIRLOCK_AGENT_UID}" --create-home \
      --home-dir /home/agent --shell /bin/sh agent
COPY --from=venv-sandbox /opt/airlock /opt/airlock
ENV PATH=/opt/airlock/bin:${PATH} \
    AIRLOCK_WORKSPACE=/workspace \
    AIRLOCK_SOCKET_DIR=/run/airlock \
    AIRLOCK_EXEC_USER=agent \
    AIRLOCK_PROXY_CA=/etc/airlock/proxy-ca.pem \
    AIRLOCK_CONTROL=unix:/run/airlock/airlockd.sock \
    GH_NO_UPDATE_NOTIFIER=1 \
    GH_PROMPT_DISABLED=1 \
    GIT_TERMINAL_PROMPT=0
COPY deploy/docker/sandbox-entrypoint.sh /usr/local/bin/airlock-sandbox-entrypoint
COPY deploy/docker/control-get.py /usr/local/bin/airlock-control-get
RUN chmod 0755 /usr/local/bin/airlock-sandbox-entrypoint /usr/local/bin/airlock-control-get \
 && ln -s /opt/airlock/bin/airlock-signed-commit /usr/local/bin/gh-signed-commit \
 && mkdir -p /workspace /run/airlock /etc/airlock /usr/local/share/airlock \
 && chown agent:airlock /workspace && chmod 2775 /workspace \
 && chown airlock:airlock /run/airlock \
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
#   airlockd --workspace $AIRLOCK_WORKSPACE --socket $AIRLOCK_SOCKET_DIR/airlockd.sock \
#            --exec-user $AIRLOCK_EXEC_USER

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
COPY deploy/docker/control-get.py /usr/local/bin/airlock-control-get
RUN chmod 0755 /usr/local/bin/airlock-control-get \
 && mkdir -p /var/lib/airlock-proxy /run/airlock-proxy \
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

# ---------------------------------------------------------------------------
# Redis for the proxies' shared store, from Debian's package: no registry pull,
# so the compose stack comes up on a mirror-only site too.
FROM base AS redis
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server redis-tools tini \
 && rm -rf /var/lib/apt/lists/*
USER redis
EXPOSE 6379
ENTRYPOINT ["tini", "--", "redis-server"]
CMD ["--save", "", "--appendonly", "no", "--bind", "0.0.0.0", "--protected-mode", "no"]
