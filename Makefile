# The test command is `make test`: formatting, vet, then every test.
GO ?= go

.PHONY: test fmt-check vet tools sim-tools sim golden bench

# Tests find the validator built here through MANIFOLD_KUBEVALIDATE; without it
# (go test ./... by hand) each test process builds its own.
test: fmt-check vet tools sim-tools
	MANIFOLD_KUBEVALIDATE=$(CURDIR)/bin/kubevalidate $(GO) test -count=1 ./...

# tools/kubevalidate runs the API server's own validation; the first build on a
# fresh machine takes a minute or two, later ones are cached by Go.
tools:
	cd tools/kubevalidate && $(GO) build -o $(CURDIR)/bin/kubevalidate .

# The simulated cluster's programs (etcd, the Kubernetes control plane, kwok, the
# JobSet and Argo controllers), built from the Go module proxy into
# $$HOME/.cache/manifold/simcluster/<versions>/ (or $$MANIFOLD_SIMCLUSTER_BIN).
# Only missing binaries are built: about 25 minutes on 2 cores the first time.
sim-tools:
	$(GO) run ./runtimes/kube/simcluster/cmd/sim-tools

# Start the simulated cluster and keep it running until Ctrl-C; it prints the
# kubeconfig path.
sim: sim-tools
	$(GO) build -o $(CURDIR)/bin/sim ./runtimes/kube/simcluster/cmd/sim
	$(CURDIR)/bin/sim

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd tools/kubevalidate && $(GO) vet ./...

# Rewrite the golden files; read `git diff golden/` before committing.
golden:
	$(GO) test ./golden -update

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
