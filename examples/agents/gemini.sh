#!/bin/sh
# daicho action: Gemini CLI in headless mode (`gemini -p`). Edits are approved automatically,
# other tools are not (--approval-mode auto_edit). DAICHO_AGENT_MODEL picks the model.
set -eu
prompt=$("$(dirname "$0")/prompt.sh")
set -- -p "$prompt" --approval-mode auto_edit --output-format text
[ -n "${DAICHO_AGENT_MODEL:-}" ] && set -- "$@" --model "$DAICHO_AGENT_MODEL"
exec gemini "$@" </dev/null
