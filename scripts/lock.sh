#!/usr/bin/env bash
# Regenerate the hash-pinned lock files in requirements/ from pyproject.toml
# (`make lock`). One lock per image and one for development/CI:
#
#   sandbox.lock        [daemon]            the sandbox image (airlockd)
#   sandbox-types.lock  [daemon,types]      the sandbox image with basedpyright
#   proxy.lock          [proxy]             the proxy image
#   client.lock         [client]            the orchestrator image
#   dev.lock            [dev]               .venv (make .venv/.installed) and CI
#   build.lock          setuptools, wheel   the wheel build inside the images
#
# Needs uv (in the dev extra, so .venv/bin/uv after `make .venv/.installed`); pip-tools' `pip-compile --generate-hashes` makes
# equivalent files. Installs use `pip install --require-hashes --no-deps -r LOCK`.
set -euo pipefail
cd "$(dirname "$0")/.."
uv="${UV:-}"
if [ -z "$uv" ]; then
  if [ -x .venv/bin/uv ]; then uv=.venv/bin/uv; else uv=uv; fi
fi
command -v "$uv" >/dev/null || { echo "lock.sh: uv is not installed (pip install uv)" >&2; exit 1; }
common=(--generate-hashes --universal --python-version 3.11 --quiet --no-header --custom-compile-command "make lock")
mkdir -p requirements
"$uv" pip compile pyproject.toml --extra daemon "${common[@]}" -o requirements/sandbox.lock
"$uv" pip compile pyproject.toml --extra daemon --extra types "${common[@]}" -o requirements/sandbox-types.lock
"$uv" pip compile pyproject.toml --extra proxy "${common[@]}" -o requirements/proxy.lock
"$uv" pip compile pyproject.toml --extra client "${common[@]}" -o requirements/client.lock
"$uv" pip compile pyproject.toml --extra dev "${common[@]}" -o requirements/dev.lock
printf 'setuptools>=77\nwheel\n' | "$uv" pip compile - "${common[@]}" -o requirements/build.lock
# Record the hash of the dependency lists the locks were made from (in its own
# file, so the locks themselves, and the image layers built from them, change
# only when the resolution does); a test compares it with pyproject.toml.
stamp=$(python3 scripts/lock_stamp.py)
echo "$stamp" >requirements/pyproject-deps.sha256
echo "lock.sh: wrote requirements/*.lock (deps $stamp)"
