#!/usr/bin/env bash
# Prints the Python of the Airflow test environment, building it first if needed:
# a virtual environment with apache-airflow and the cncf.kubernetes provider at
# the versions pinned in constraints.txt, from PyPI. It is cached outside the clone,
# under ${MANIFOLD_CACHE:-$HOME/.cache/manifold}/airflow/<hash of constraints.txt>/,
# so clean clones reuse it and a changed constraints file builds a new one.
# Progress goes to standard error; standard output is only the interpreter's path.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
constraints="$here/constraints.txt"
python="${MANIFOLD_AIRFLOW_BASE_PYTHON:-python3}"
key="$(sha256sum "$constraints" | cut -c1-16)"
dir="${MANIFOLD_CACHE:-$HOME/.cache/manifold}/airflow/$key"

if [ ! -f "$dir/ready" ]; then
	mkdir -p "$(dirname "$dir")"
	# One builder at a time; the others wait, then find it ready.
	exec 9>"$dir.lock"
	flock 9
	if [ ! -f "$dir/ready" ]; then
		echo "building the Airflow test environment in $dir (a few minutes, once)" >&2
		start=$SECONDS
		rm -rf "$dir"
		"$python" -m venv "$dir" >&2
		"$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
			-c "$constraints" \
			apache-airflow==3.3.2 apache-airflow-providers-cncf-kubernetes==10.25.0 >&2
		"$dir/bin/python" -c 'import airflow.providers.cncf.kubernetes.operators.pod' >&2
		touch "$dir/ready"
		echo "built the Airflow test environment in $((SECONDS - start))s" >&2
	fi
	flock -u 9
fi
echo "$dir/bin/python"
