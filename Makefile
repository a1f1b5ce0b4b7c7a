# Shorthands for the scripts the README names.
.PHONY: run test bench

run:
	scripts/run $(ARGS)

test:
	scripts/test

bench:
	PATH="$$PATH:/usr/local/go/bin" go test -run '^$$' -bench . -benchmem ./...
