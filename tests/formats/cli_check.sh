#!/bin/sh
# cli_check.sh EXPECTED_EXIT REGEX CMD [ARGS...]
# Runs CMD, then fails unless its exit code is EXPECTED_EXIT and its combined
# stdout+stderr matches the extended regular expression REGEX.
expected=$1
regex=$2
shift 2
output=$("$@" 2>&1)
rc=$?
printf '%s\n' "$output"
if [ "$rc" -ne "$expected" ]; then
  echo "cli_check: exit code $rc, expected $expected: $*" >&2
  exit 1
fi
if ! printf '%s\n' "$output" | grep -Eq -- "$regex"; then
  echo "cli_check: output does not match /$regex/: $*" >&2
  exit 1
fi
exit 0
