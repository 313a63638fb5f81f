#!/bin/sh
# lmikit entrypoint: run the start-up step, then exec LMI's own entrypoint unchanged.
# The start-up step prints `export NAME=value` lines (LMCache sizing, HF_TOKEN, metrics
# dir, and with the metrics front SERVING_INFERENCE_ADDRESS/SERVING_MANAGEMENT_ADDRESS that
# move djl-serving behind it) on stdout; they are evaluated here so the token never touches a
# file or a log. When the step returns, the front is already accepting on port 8080.
# PYTHONPATH is set for the start-up step only: the LMI server's environment is untouched.
set -eu
exports="$(PYTHONPATH="${LMIKIT_HOME:-/opt/lmikit}" python3 -m lmikit_runtime.start)" || {
    status=$?
    echo "lmikit-start: start-up failed (exit $status); not starting LMI" >&2
    exit "$status"
}
eval "$exports"
unset exports
exec "${LMIKIT_LMI_ENTRYPOINT:-/usr/local/bin/dockerd-entrypoint.sh}" "$@"
