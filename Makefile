# The test command is `make test`: formatting, vet, then every test.
GO ?= go

.PHONY: test fmt-check vet golden bench

test: fmt-check vet
	$(GO) test -count=1 ./...

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Rewrite the golden files; read `git diff golden/` before committing.
golden:
	$(GO) test ./golden -update

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
