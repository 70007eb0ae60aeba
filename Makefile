# The test command is `make test`: formatting, vet, then every test.
GO ?= go

.PHONY: test fmt-check vet tools airflow moto sim-tools sim golden docs ec2types bench bench-load fuzz

# Tests find the checkers built here through MANIFOLD_KUBEVALIDATE and
# MANIFOLD_ARGOLINT, the Airflow environment through MANIFOLD_AIRFLOW_PYTHON and
# the S3 test server's through MANIFOLD_MOTO_PYTHON; without them (go test ./... by
# hand) each test process builds its own checkers and finds or builds the cached
# Python environments itself. The simulated cluster's programs must be built
# (sim-tools) before its tests run.
test: fmt-check vet tools airflow moto sim-tools
	MANIFOLD_KUBEVALIDATE=$(CURDIR)/bin/kubevalidate \
	MANIFOLD_ARGOLINT=$(CURDIR)/bin/argolint \
	MANIFOLD_AIRFLOW_PYTHON=$$(tools/airflow/venv.sh) \
	MANIFOLD_MOTO_PYTHON=$$(tools/moto/venv.sh) \
	$(GO) test -count=1 -timeout 30m ./...
	cd tools/ec2types && $(GO) test -count=1 ./...

# tools/kubevalidate runs the API server's own validation, tools/argolint Argo's
# validator; the first build on a fresh machine takes a few minutes, later ones are
# cached by Go.
tools:
	cd tools/kubevalidate && $(GO) build -o $(CURDIR)/bin/kubevalidate .
	cd tools/argolint && $(GO) build -o $(CURDIR)/bin/argolint .

# The Airflow test environment: apache-airflow and its cncf.kubernetes provider,
# pinned by tools/airflow/constraints.txt, from PyPI. Built once (a few minutes)
# and cached under $$HOME/.cache/manifold/airflow/<hash of the constraints>/.
airflow:
	tools/airflow/venv.sh >/dev/null

# The S3 test server's environment: moto's server (moto[server]) from PyPI, pinned
# by tools/moto/constraints.txt; the artifact store tests start it on a loopback
# port. Built once (under a minute) and cached under
# $$HOME/.cache/manifold/moto/<hash of the constraints>/.
moto:
	tools/moto/venv.sh >/dev/null

# The simulated cluster's programs (etcd, the Kubernetes control plane and the
# real nodes' kubelet, kwok, the JobSet, Argo and Kueue controllers), built from the Go module proxy into
# $$HOME/.cache/manifold/simcluster/<versions>/ (or $$MANIFOLD_SIMCLUSTER_BIN).
# Only missing binaries are built: about 30 minutes on 2 cores the first time.
sim-tools:
	$(GO) run ./tools/sim-tools

# Start the simulated cluster and keep it running until Ctrl-C; it prints the
# kubeconfig path. REAL_NODES=N adds N real nodes (root; containerd, runc and the
# CNI plugins from Debian, as .ci/run installs them).
REAL_NODES ?= 0
sim: sim-tools
	$(GO) build -o $(CURDIR)/bin/sim ./tools/sim
	$(CURDIR)/bin/sim -real-nodes $(REAL_NODES)

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd tools/kubevalidate && $(GO) vet ./...
	cd tools/argolint && $(GO) vet ./...
	cd tools/kindmanifests && $(GO) vet ./...
	cd tools/ec2types && $(GO) vet ./...

# Rewrite the golden files; read `git diff golden/` before committing.
golden:
	$(GO) test ./golden -update

# Rewrite the reference pages generated from the code (docs/reference/: the
# command line and manifold.toml); tools/docgen's test fails while they are stale.
docs:
	$(GO) run ./tools/docgen

# Rewrite catalog/ec2types_gen.go, every EC2 instance type, from the AWS SDK for Go
# that tools/ec2types/go.mod pins (raise it there with go get to take in new
# types); tools/ec2types' test, run by make test, fails while the file is stale.
ec2types:
	cd tools/ec2types && $(GO) run .

# One table of every performance goal against its figure: the Go benchmarks
# that report each goal's metric (b.ReportMetric, agreed by name: s/build-warm,
# s/chain100, …), found in the test files and run five times (a few minutes;
# timings vary with the machine's load, which the table prints). BENCHFLAGS=
# -markdown prints it for docs/performance.md; -list names the benchmarks.
BENCHFLAGS ?=
bench:
	$(GO) run ./tools/benchtable $(BENCHFLAGS)

# make bench, and run --kube's load benchmarks on the simulated cluster (a
# 1,000-step fan-out, a 100-step chain, 10,000 foreach items; the first two
# against Argo's controller): more than an hour, after make sim-tools.
bench-load:
	$(GO) run ./tools/benchtable -load $(BENCHFLAGS)

# Every fuzz target, as package:Function; go test runs one target at a time.
# harness/fuzzlist checks that this list names every Fuzz function.
FUZZ = ./compile:FuzzCompile ./compile:FuzzLoadConfig ./emit:FuzzFlowOptions \
	./emit:FuzzArgoTemplating ./emit/argo:FuzzArgoValidates ./emit/encode:FuzzYAMLMatchesYAMLv2 ./emit/job:FuzzEmitRoundTrip \
	./emit/airflow:FuzzQuote ./emit/airflow:FuzzAppendIndented ./runtimes/record:FuzzRead
FUZZTIME ?= 30s

# Run each fuzz target for FUZZTIME (make fuzz FUZZTIME=10m). A failure writes
# the input under the package's testdata/fuzz/; commit it with the fix.
fuzz:
	@set -e; for t in $(FUZZ); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		tools/fuzz.sh $(GO) $$pkg $$name $(FUZZTIME); \
	done
