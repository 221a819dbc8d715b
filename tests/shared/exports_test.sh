#!/usr/bin/env bash
# Runs exports_test.py (arguments from the BUILD file) with the system's python3.
exec python3 "$(dirname "$0")/exports_test.py" "$@"
