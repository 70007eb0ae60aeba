#!/usr/bin/env bash
# Prints the Python of the S3 test server's environment, building it first if
# needed: a virtual environment with moto's server (moto[server]) at the versions
# pinned in constraints.txt, from PyPI. The artifact store tests run
# `python -m moto.server` from it on a loopback port. It is cached outside the
# clone, under ${MANIFOLD_CACHE:-$HOME/.cache/manifold}/moto/<hash of constraints.txt>/,
# so clean clones reuse it and a changed constraints file builds a new one.
# Progress goes to standard error; standard output is only the interpreter's path.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
constraints="$here/constraints.txt"
python="${MANIFOLD_MOTO_BASE_PYTHON:-python3}"
key="$(sha256sum "$constraints" | cut -c1-16)"
dir="${MANIFOLD_CACHE:-$HOME/.cache/manifold}/moto/$key"

if [ ! -f "$dir/ready" ]; then
	mkdir -p "$(dirname "$dir")"
	# One builder at a time; the others wait, then find it ready.
	exec 9>"$dir.lock"
	flock 9
	if [ ! -f "$dir/ready" ]; then
		echo "building the S3 test server's environment in $dir (a minute, once)" >&2
		start=$SECONDS
		rm -rf "$dir"
		"$python" -m venv "$dir" >&2
		"$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
			-c "$constraints" 'moto[server]==5.2.1' >&2
		"$dir/bin/python" -c 'import moto.server' >&2
		touch "$dir/ready"
		echo "built the S3 test server's environment in $((SECONDS - start))s" >&2
	fi
	flock -u 9
fi
echo "$dir/bin/python"
