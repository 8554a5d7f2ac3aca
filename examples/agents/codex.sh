#!/bin/sh
# daicho action: OpenAI Codex non-interactively (`codex exec`). Progress goes to stderr, the
# final message to stdout (the result). The sandbox lets it edit this directory only; stdin is
# closed so codex does not wait for more input. DAICHO_AGENT_MODEL picks the model.
set -eu
prompt=$("$(dirname "$0")/prompt.sh")
set -- exec --sandbox workspace-write --skip-git-repo-check --ephemeral
[ -n "${DAICHO_AGENT_MODEL:-}" ] && set -- "$@" --model "$DAICHO_AGENT_MODEL"
exec codex "$@" "$prompt" </dev/null
