package history

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestEach: Each hands over every op ReadAll reads, in order, across many
// batches; it reports a malformed op after the ops before it, and stops
// when its context ends.
func TestEach(t *testing.T) {
	var b strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&b, "{:index %d, :type :invoke, :process %d, :f :read}\n", i, i%5)
	}
	text := b.String()
	want, err := ReadAll(strings.NewReader(text), "h")
	if err != nil {
		t.Fatal(err)
	}
	var got []Op
	if err := NewReader(strings.NewReader(text), "h").Each(context.Background(), func(o Op) { got = append(got, o) }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Each handed %d ops, ReadAll read %d, or they differ", len(got), len(want))
	}

	got = got[:0]
	err = NewReader(strings.NewReader(text+"{:type :nope}\n"), "h").Each(context.Background(), func(o Op) { got = append(got, o) })
	var se *SyntaxError
	if !errors.As(err, &se) || len(got) != len(want) {
		t.Errorf("malformed op: %v after %d ops, want a SyntaxError after %d", err, len(got), len(want))
	}

	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err = NewReader(strings.NewReader(text), "h").Each(ctx, func(Op) {
		if n++; n == 10 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || n >= len(want) {
		t.Errorf("cancelled: %v after %d ops, want context.Canceled before the end", err, n)
	}
}
