#!/bin/sh
# daicho action: Aider with one message (`aider --message`): it applies the edits and exits.
# Aider's own commits are off so a person reviews the change first; its output is the result.
# DAICHO_AGENT_MODEL picks the model.
set -eu
prompt=$("$(dirname "$0")/prompt.sh")
set -- --message "$prompt" --yes-always --no-auto-commits --no-stream --no-pretty
[ -n "${DAICHO_AGENT_MODEL:-}" ] && set -- "$@" --model "$DAICHO_AGENT_MODEL"
exec aider "$@" </dev/null
