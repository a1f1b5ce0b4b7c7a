package checker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hiatus-dev/hiatus/internal/gen"
)

// BenchmarkOpenCheck times what hiatus check does with a history file:
// Open reads it into a Stream, then Check judges it; with its records in
// memory (the default budget), and with every record on disk, as a history
// past the budget has them.
func BenchmarkOpenCheck(b *testing.B) {
	for _, sections := range []int{250000} {
		path := filepath.Join(b.TempDir(), "history.edn")
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = gen.Write(f, gen.Config{Sections: sections, Workers: 64, Seed: 1})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
		fi, _ := os.Stat(path)
		for _, memory := range []int64{0, 1} {
			b.Run(fmt.Sprintf("sections=%d/spill=%v", sections, memory == 1), func(b *testing.B) {
				b.SetBytes(fi.Size())
				b.ReportAllocs()
				for b.Loop() {
					h, err := Open(context.Background(), path, Options{Memory: memory}, false, nil)
					if err != nil {
						b.Fatal(err)
					}
					rs, err := h.Check(context.Background(), Options{})
					if err != nil || rs.Valid != Valid {
						b.Fatalf("%v: %s", err, rs.AppendEDN(nil))
					}
				}
			})
		}
	}
}

// BenchmarkOpenCheckLists is BenchmarkOpenCheck on a list-append history
// of 1,000,000 ops (125,000 sections): docs/performance.md's target is
// 5 s and 256 MB for `hiatus check` of it.
func BenchmarkOpenCheckLists(b *testing.B) {
	path := filepath.Join(b.TempDir(), "history.edn")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	_, err = gen.Write(f, gen.Config{Sections: 125000, Workers: 3, Lost: 5, Info: 20, Seed: 1, Lists: true})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		h, err := Open(context.Background(), path, Options{}, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		rs, err := h.Check(context.Background(), Options{})
		r, _ := rs.Check(ModelListAppend)
		if err != nil || r.Get("lost-min") != int64(5) {
			b.Fatalf("%v: %s", err, rs.AppendEDN(nil))
		}
	}
}
