# The two commands of the README: `make run` and `make test`. Each does its
# own set-up on a fresh Debian machine (scripts/setup).
export PATH := $(PATH):/usr/local/go/bin

.PHONY: setup build run test bench vet

setup:
	@scripts/setup

build: setup
	go build -o bin/hiatus ./cmd/hiatus

# The default experiment, on throwaway servers: SIGSTOP 0.8 s pauses of a
# 500 ms lease lock, 3 workers, 10 s. Pass more flags with ARGS="…".
run: build
	bin/hiatus run $(ARGS)

test: setup
	gofmt -l . | (! grep .) || (echo "gofmt would change the files above" >&2; exit 1)
	go vet ./...
	go test -count=1 ./...

bench: setup
	go test -run '^$$' -bench . -benchmem ./...
