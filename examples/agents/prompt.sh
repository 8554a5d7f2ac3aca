#!/bin/sh
# Prints the prompt a coding agent gets for one daicho task: the task as JSON (daicho writes it
# on the executor's stdin), the person's correction, the idempotency key and the answer's form.
# daicho sets DAICHO_TASK_ID, DAICHO_ATTEMPT, DAICHO_IDEMPOTENCY_KEY and DAICHO_CORRECTION for
# every run; the agent inherits them too, so a tool it runs can read the key.
set -eu
task=$(cat)
printf 'You are doing task %s of a daicho ledger (attempt %s). Do the task in this directory.\n\n' \
  "${DAICHO_TASK_ID:?run by daicho}" "${DAICHO_ATTEMPT:-1}"
printf 'The task as JSON (title, body, evidence, project, due, deps):\n%s\n\n' "$task"
if [ -n "${DAICHO_CORRECTION:-}" ]; then
  printf '## Additional correction from a person (about the previous result; apply it first)\n%s\n' "$DAICHO_CORRECTION"
  printf 'Where any default way of doing this contradicts the correction above, follow the correction.\n\n'
fi
printf 'Idempotency key: %s. This task may run again after a crash: anything with an effect outside this directory (a commit trailer, an API call, a message) carries this key, and is not done again when something with this key already exists.\n\n' \
  "${DAICHO_IDEMPOTENCY_KEY:?run by daicho}"
printf 'When you are done, answer with one JSON object and nothing else (no code fence): {"result": "what you did, for the person who reviews it", "tasks": [{"title": "a follow-up task you found", "body": "why it is needed"}]}. Leave "tasks" empty when there are none.\n'
