#!/bin/sh
# Runs the `openai` npm client tests (openai_client_test.mjs). Without node or the client (scripts/setup.sh
# --test-data fetches it) the test is skipped (exit 77), or fails when DG_REQUIRE_TEST_DATA=1 (CI).
missing=""
command -v node >/dev/null 2>&1 || missing="node (Debian: nodejs)"
[ -z "$missing" ] && [ ! -f "$DG_NODE_MODULES/openai/package.json" ] && missing="the openai npm client at $DG_NODE_MODULES/openai (run scripts/setup.sh --test-data)"
if [ -n "$missing" ]; then
  if [ "${DG_REQUIRE_TEST_DATA:-0}" = 1 ]; then
    echo "openai_client.sh: FAILED: missing $missing, and DG_REQUIRE_TEST_DATA=1" >&2
    exit 1
  fi
  echo "openai_client.sh: skipped: missing $missing" >&2
  exit 77
fi
exec node "$(dirname "$0")/openai_client_test.mjs"
