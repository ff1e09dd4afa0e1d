#!/bin/sh
# Fail when a filled form still has empty required fields.
set -eu
python scripts/fill_form.py --list "$1"
