package progress

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// TestCheckProgressLine: what a person watching a long check sees, at each
// stage; and nothing at all where stderr is no terminal.
func TestCheckProgressLine(t *testing.T) {
	var out bytes.Buffer
	p := StartCheck(&out, "big.edn", 2_000_000_000)
	t0 := p.start
	if got := p.line(t0.Add(time.Second)); got != "big.edn: read 0 B (1s)" {
		t.Errorf("before reading: %q", got)
	}
	if _, err := io.Copy(io.Discard, p.Reader(strings.NewReader(strings.Repeat("x", 500_000_000)))); err != nil {
		t.Fatal(err)
	}
	if got, want := p.line(t0.Add(4*time.Second)), "big.edn: read 25% (500 MB of 2.00 GB), ~12s left to read"; got != want {
		t.Errorf("a quarter read in 4 s: %q, want %q", got, want)
	}
	p.Checking("checking 2,500,000 sections")
	if got, want := p.line(t0.Add(17*time.Second)), "big.edn: checking 2,500,000 sections (17s)"; got != want {
		t.Errorf("checking: %q, want %q", got, want)
	}
	p.End()
	if out.Len() != 0 {
		t.Errorf("a buffer is no terminal, yet progress wrote %q", out.String())
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 2500000: "2,500,000", -20000130: "-20,000,130"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
