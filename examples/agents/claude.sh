#!/bin/sh
# daicho action: Claude Code in print mode (`claude -p`). The final message is the result; a
# {"result", "tasks"} answer also registers the tasks it found. File edits are accepted without
# asking; shell commands follow your Claude Code settings (allow them there, or add
# --allowedTools). DAICHO_AGENT_MODEL picks the model.
set -eu
prompt=$("$(dirname "$0")/prompt.sh")
set -- -p "$prompt" --output-format text --max-turns "${DAICHO_AGENT_MAX_TURNS:-30}" --permission-mode acceptEdits
[ -n "${DAICHO_AGENT_MODEL:-}" ] && set -- "$@" --model "$DAICHO_AGENT_MODEL"
exec claude "$@" </dev/null
