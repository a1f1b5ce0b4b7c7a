package report

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/browser"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// serverEvent is an event of a lock server's record, for the tests.
func serverEvent(at int64, node string, act history.Keyword, token, client string) history.ServerEvent {
	return history.ServerEvent{Time: at, Node: node, Act: act, Key: "k", Token: token, Client: client,
		Deadline: history.Unset, Until: history.Unset, NodeTime: history.Unset}
}

// aRecord is a record of two nodes: on redis-0 a hold deleted by its
// holder, one renewed and then expired, one overwritten, a gap, and one
// held at the end; on redis-1 a grant alone.
func aRecord() []history.ServerEvent {
	ev := serverEvent
	withDeadline := func(e history.ServerEvent, d int64) history.ServerEvent { e.Deadline = d; return e }
	gap := ev(55e6, "redis-0", history.SGap, "", "")
	gap.Until = 60e6
	return []history.ServerEvent{
		withDeadline(ev(10e6, "redis-0", history.SGrant, "a", "worker-0"), 510e6),
		ev(12e6, "redis-1", history.SGrant, "a", "worker-0"),
		ev(15e6, "redis-0", history.SRefuse, "a", "worker-1"),
		ev(20e6, "redis-0", history.SDelete, "a", "worker-0"),
		withDeadline(ev(25e6, "redis-0", history.SGrant, "b", "worker-1"), 30e6),
		withDeadline(ev(28e6, "redis-0", history.SRenew, "b", "worker-1"), 38e6),
		ev(39e6, "redis-0", history.SExpire, "b", ""),
		ev(45e6, "redis-0", history.SGrant, "c", "worker-2"),
		ev(50e6, "redis-0", history.SOverwrite, "d", "hiatus"),
		gap,
		ev(65e6, "redis-0", history.SGrant, "e", "worker-1"),
	}
}

// TestTimelineServerRows: the record becomes a row a node of holds, each
// from the grant that began it to what ended it — a delete and by whom, an
// expiry after its last renewal's deadline, an overwrite, a gap — the last
// drawn to the history's end, and the gaps themselves.
func TestTimelineServerRows(t *testing.T) {
	tl := &Timeline{Workers: 3}
	tl.Add(history.Op{Index: 0, Time: 0, Type: history.Invoke, Process: 0, F: history.FAcquire})
	tl.Add(history.Op{Index: 1, Time: 100e6, Type: history.Ok, Process: 0, F: history.FAcquire})
	for _, e := range aRecord() {
		tl.AddServer(e)
	}
	d := tl.serverData(func(ns int64) int64 { return ns / 1e3 })
	type hold struct {
		node       int
		t0, t1, dl int64
		holder, by string
		how        history.Keyword
	}
	var got []hold
	for k := range d.T0 {
		got = append(got, hold{d.Node[k], d.T0[k], d.T1[k], d.DL[k], d.Clients[d.C[k]], d.Clients[d.By[k]], d.Ends[d.How[k]]})
	}
	want := []hold{
		{0, 10e3, 20e3, 510e3, "worker-0", "worker-0", history.SDelete},
		{1, 12e3, 100e3, -1, "worker-0", "", ""},
		{0, 25e3, 39e3, 38e3, "worker-1", "", history.SExpire},
		{0, 45e3, 50e3, -1, "worker-2", "hiatus", history.SOverwrite},
		{0, 50e3, 55e3, -1, "hiatus", "", history.SGap},
		{0, 65e3, 100e3, -1, "worker-1", "", ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("holds:\n%+v\nwant\n%+v", got, want)
	}
	if !slices.Equal(d.Nodes, []string{"redis-0", "redis-1"}) || len(d.GapAt) != 1 || d.GapAt[0] != [2]int64{55e3, 60e3} {
		t.Errorf("nodes %v, gaps %v: want redis-0 and redis-1, one gap 55–60 ms", d.Nodes, d.GapAt)
	}
	if d.Worker[0] != 0 || d.Worker[3] != 2 || d.Worker[4] != -1 {
		t.Errorf("holders' slots %v: want worker-0's 0, worker-2's 2, hiatus's -1", d.Worker)
	}
}

// TestTimelineServerBounded: holds past MaxSections are counted, not
// kept, and holds outside the window are left out.
func TestTimelineServerBounded(t *testing.T) {
	for _, tc := range []struct {
		tl   Timeline
		kept int
	}{
		{Timeline{MaxSections: 2}, 2},
		{Timeline{From: 30e6}, 5},                 // ends before From: the first alone
		{Timeline{From: 30e6, MaxSections: 4}, 4}, // compacted: the first goes, the others come
		{Timeline{To: 30e6}, 3},                   // begins at To or after: the last three
	} {
		tl := tc.tl
		tl.Add(history.Op{Index: 0, Time: 0, Type: history.Ok, Process: 0, F: history.FAcquire})
		for _, e := range aRecord() {
			tl.AddServer(e)
		}
		if d := tl.serverData(func(ns int64) int64 { return ns / 1e3 }); len(d.T0) != tc.kept {
			t.Errorf("MaxSections %d, window [%d, %d): %d holds kept, want %d", tc.tl.MaxSections, tc.tl.From, tc.tl.To, len(d.T0), tc.kept)
		}
	}
}

// TestTimelineServerInBrowser: the page draws each node's row under the
// workers', a hold in its holder's colour, and names it on hover.
func TestTimelineServerInBrowser(t *testing.T) {
	ops, _, err := gen.Ops(gen.Config{Sections: 50, Workers: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tl := timelineOf(ops, 3)
	last := ops[len(ops)-1].Time
	for i, e := range aRecord() {
		e.Time, e.Until = e.Time*last/110e6, e.Until*last/110e6 // spread over the history
		e.Index = int64(i)
		tl.AddServer(e)
	}
	path := filepath.Join(t.TempDir(), TimelineFile)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.WriteHTML(f, TimelinePage{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx := browser.New(t, 1200, 800, time.Minute)
	var seen struct {
		Holds  int
		Colour []int
		Words  string
	}
	err = chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.Poll[chromedp.Void](`window.timeline && timeline.holds > 0`),
		evalInto(&seen, `(() => {
			const c = document.getElementById("canvas"), d = devicePixelRatio || 1;
			const p = timeline.placeHold(2); // worker-1's, from 25 to 39 ms of 110
			const h = timeline.hit((p.x0 + p.x1) / 2, p.top + p.barY + p.barH / 2);
			return {Holds: timeline.holds,
				Colour: Array.from(c.getContext("2d").getImageData(Math.round((p.x0 + p.x1) / 2 * d), Math.round((p.top + p.barY + p.barH / 2) * d), 1, 1).data.slice(0, 3)),
				Words: h && h.hold !== undefined ? timeline.holdWords(h.hold) : ""};
		})()`))
	if err != nil {
		t.Fatal(err)
	}
	if seen.Holds != 6 || !near(seen.Colour, 0x2e, 0x9e, 0x6b) {
		t.Errorf("%d holds, hold 2 drawn %v: want 6, and worker-1's green", seen.Holds, seen.Colour)
	}
	if !strings.Contains(seen.Words, "redis-0: the key held by worker-1 (token b)") || !strings.Contains(seen.Words, "expired") {
		t.Errorf("hold 2 on hover: %q, want it named, held by worker-1, expired", seen.Words)
	}
}
