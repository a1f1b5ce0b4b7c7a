package report

import (
	"cmp"

	"github.com/hiatus-dev/hiatus/history"
)

// The lock server's record on the timeline: a row a lock node, under the
// workers', showing who held the key and until when — each hold from the
// grant that began it to the delete, expiry, overwrite or gap that ended
// it, in the holder's colour, with its deadline — so that a section the
// workers' rows show held past its lease stands beside the key the server
// had already given to another.

// A tlHold is one hold of the key on a node: from a grant (or an
// overwrite) to what ended it.
type tlHold struct {
	node       int
	start, end int64 // history ns; end is Unset while open
	deadline   int64 // the last deadline the node gave it; Unset for none
	client     string
	token      string
	how        history.Keyword // what ended it: :delete, :expire, :overwrite, :gap; "" held at the record's end
	by         string          // who ended it (a delete's, an overwrite's client)
}

// A tlGap is a time the record lost sight of a node.
type tlGap struct {
	node       int
	start, end int64 // end Unset: never seen again
}

// serverRows gathers the record, node by node.
type serverRows struct {
	nodes   []string
	index   map[string]int
	holds   []tlHold
	open    map[int]int // node -> its open hold, an index into holds
	gaps    []tlGap
	dropped int // holds past the bound, counted not kept
}

// AddServer takes the next event of the run's lock server's record
// (lockserver.edn), in the record's order, after the history's ops: the
// page draws a row a node.
func (t *Timeline) AddServer(e history.ServerEvent) {
	s := &t.server
	if s.index == nil {
		s.index, s.open = map[string]int{}, map[int]int{}
	}
	n, ok := s.index[e.Node]
	if !ok {
		n = len(s.nodes)
		s.index[e.Node] = n
		s.nodes = append(s.nodes, e.Node)
	}
	switch e.Act {
	case history.SGrant:
		t.endHold(n, e.Time, "", "")
		t.beginHold(n, e)
	case history.SOverwrite:
		t.endHold(n, e.Time, history.SOverwrite, e.Client)
		t.beginHold(n, e)
	case history.SRenew:
		if i, ok := s.open[n]; ok {
			s.holds[i].deadline = e.Deadline
		}
	case history.SDelete, history.SExpire:
		t.endHold(n, e.Time, e.Act, e.Client)
	case history.SGap:
		t.endHold(n, e.Time, history.SGap, "")
		s.gaps = append(s.gaps, tlGap{node: n, start: e.Time, end: e.Until})
	}
}

// beginHold opens a hold of node n by the grant or overwrite e.
func (t *Timeline) beginHold(n int, e history.ServerEvent) {
	s := &t.server
	bound := cmp.Or(t.MaxSections, DefaultMaxSections)
	if len(s.holds) >= bound {
		t.compactHolds()
	}
	if len(s.holds) >= bound || t.To > 0 && e.Time-t.first >= t.To {
		s.dropped++
		return
	}
	s.holds = append(s.holds, tlHold{node: n, start: e.Time, end: history.Unset, deadline: e.Deadline, client: e.Client, token: e.Token})
	s.open[n] = len(s.holds) - 1
}

// endHold ends node n's open hold, if it has one, at the time at, how,
// by whom.
func (t *Timeline) endHold(n int, at int64, how history.Keyword, by string) {
	s := &t.server
	i, ok := s.open[n]
	if !ok {
		return
	}
	delete(s.open, n)
	h := &s.holds[i]
	h.end, h.how, h.by = at, how, by
}

// before reports whether hold h ended before the timeline's window.
func (t *Timeline) before(h tlHold) bool { return h.end != history.Unset && h.end-t.first < t.From }

// compactHolds drops the holds that ended before the window, which a
// window late in a long history would otherwise fill the bound with.
func (t *Timeline) compactHolds() {
	s := &t.server
	kept := s.holds[:0]
	for i, h := range s.holds {
		if t.before(h) {
			continue
		}
		for n, j := range s.open {
			if j == i {
				s.open[n] = len(kept)
			}
		}
		kept = append(kept, h)
	}
	s.holds = kept
}

// tlServer is the record's part of the page's data: times in µs from the
// history's first op, one entry a hold in each column.
type tlServer struct {
	Nodes   []string          `json:"nodes"`   // a row each, under the workers'
	Clients []string          `json:"clients"` // the holders and deleters, by number
	Ends    []history.Keyword `json:"ends"`    // how holds ended, by number; 0 "" held at the end
	Node    []int             `json:"node"`
	T0      []int64           `json:"t0"`
	T1      []int64           `json:"t1"`
	DL      []int64           `json:"dl"` // the deadline; -1 none
	C       []int             `json:"c"`  // the holder, an index into clients
	Worker  []int             `json:"w"`  // the holder's worker slot ("worker-N"); -1 none
	By      []int             `json:"by"` // who ended it, an index into clients
	How     []int             `json:"how"`
	Tok     []string          `json:"tok"` // the token, shortened
	GapAt   [][2]int64        `json:"gapAt"`
	GapNode []int             `json:"gapNode"`
	Dropped int               `json:"dropped"`
}

// serverData is the record's part of the page's data, every open hold
// drawn to the history's end.
func (t *Timeline) serverData(us func(int64) int64) tlServer {
	s := &t.server
	d := tlServer{Nodes: s.nodes, Clients: []string{""}, Ends: []history.Keyword{""}, Dropped: s.dropped,
		Node: []int{}, T0: []int64{}, T1: []int64{}, DL: []int64{}, C: []int{}, Worker: []int{}, By: []int{}, How: []int{}, Tok: []string{},
		GapAt: [][2]int64{}, GapNode: []int{}}
	if d.Nodes == nil {
		d.Nodes = []string{}
	}
	clients := map[string]int{"": 0}
	number := func(c string) int {
		if i, ok := clients[c]; ok {
			return i
		}
		clients[c] = len(d.Clients)
		d.Clients = append(d.Clients, c)
		return len(d.Clients) - 1
	}
	ends := map[history.Keyword]int{"": 0}
	for _, h := range s.holds {
		if t.before(h) {
			continue
		}
		end, dl := h.end, int64(-1)
		if end == history.Unset {
			end = max(t.last, h.start)
		}
		if h.deadline != history.Unset {
			dl = us(h.deadline)
		}
		how, ok := ends[h.how]
		if !ok {
			how = len(d.Ends)
			ends[h.how] = how
			d.Ends = append(d.Ends, h.how)
		}
		d.Node, d.T0, d.T1, d.DL = append(d.Node, h.node), append(d.T0, us(h.start)), append(d.T1, us(end)), append(d.DL, dl)
		d.C, d.Worker, d.By, d.How = append(d.C, number(h.client)), append(d.Worker, workerSlotOf(h.client)), append(d.By, number(h.by)), append(d.How, how)
		d.Tok = append(d.Tok, shortToken(h.token))
	}
	for _, g := range s.gaps {
		end := g.end
		if end == history.Unset {
			end = max(t.last, g.start)
		}
		d.GapAt, d.GapNode = append(d.GapAt, [2]int64{us(g.start), us(end)}), append(d.GapNode, g.node)
	}
	return d
}

// shortToken is a token as the page names it: its first 10 characters.
func shortToken(tok string) string {
	if r := []rune(tok); len(r) > 10 {
		return string(r[:10]) + "…"
	}
	return tok
}

// workerSlotOf is the worker slot a connection's name says, -1 for none:
// the page's number for it.
func workerSlotOf(client string) int {
	if n, ok := history.WorkerSlot(client); ok {
		return int(n)
	}
	return -1
}
