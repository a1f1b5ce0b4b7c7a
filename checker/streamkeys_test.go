package checker

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
)

// TestStreamKeys: every extra key the checker reads (Op.Get) is one that
// openStream's Reader keeps. A key read and not kept would read as absent
// in a check of a file and present in a check of ops in memory: a
// fenced write unfenced, a :final read not final. It reads the source's
// text: a Get of a key held in a variable, o.Extra[k], or a helper of
// another package that reads an extra key gets past it, so the checker
// reads them only as .Get(history.KeyX). The keys of the lock server's
// record are read from its own events, read whole (recordKeys), and the
// history's :token only with a record, whose Reader keeps it
// (recordStreamKeys): record.go, which reads both, is held to the three
// lists together.
func TestStreamKeys(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	get := regexp.MustCompile(`\.Get\(history\.(Key\w+)\)`)
	names := map[string]history.Keyword{"KeyLeaseMS": history.KeyLeaseMS, "KeyFence": history.KeyFence,
		"KeyFinal": history.KeyFinal, "KeyResolved": history.KeyResolved, "KeyToken": history.KeyToken, "KeySection": history.KeySection,
		"KeyKey": history.KeyKey, "KeyWas": history.KeyWas, "KeyClient": history.KeyClient, "KeyCommand": history.KeyCommand, "KeyDeadline": history.KeyDeadline, "KeyUntil": history.KeyUntil, "KeyGuess": history.KeyGuess,
		"KeyUncertainty": history.KeyUncertainty, "KeyExpiryGrain": history.KeyExpiryGrain}
	read := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range get.FindAllSubmatch(src, -1) {
			read++
			k, ok := names[string(m[1])]
			if !ok {
				t.Errorf("%s reads history.%s, which this test does not know: add it to names", f, m[1])
				continue
			}
			kept := streamKeys()
			if f == "record.go" {
				kept = slices.Concat(kept, recordStreamKeys(), recordKeys())
			}
			if !slices.Contains(kept, k) {
				t.Errorf("%s reads :%s, which streamKeys leaves out", f, k)
			}
		}
	}
	if read == 0 {
		t.Fatal("found no Op.Get in the checker's files")
	}
}
