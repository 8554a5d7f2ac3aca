#!/bin/sh
# A stand-in for real work: gets the task as JSON on stdin, takes a moment, reports what it did.
cat > /dev/null
sleep "${STEP_SECONDS:-1}"
echo "finished $DAICHO_TASK_ID (attempt $DAICHO_ATTEMPT)"
