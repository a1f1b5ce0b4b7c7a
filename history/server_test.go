package history

import (
	"io"
	"strings"
	"testing"
)

func TestWorkerName(t *testing.T) {
	for _, c := range []struct {
		p       Process
		workers int
		want    string
	}{
		{0, 3, "worker-0"},
		{3, 3, "worker-0"}, // slot 0's process after an :info
		{5, 3, "worker-2"},
		{3, 5, "worker-3"},
		{Nemesis, 3, ""},
		{-2, 3, ""}, // a named process: no worker
		{1, 0, ""},
	} {
		if got := WorkerName(c.p, c.workers); got != c.want {
			t.Errorf("WorkerName(%v, %d) = %q, want %q", c.p, c.workers, got, c.want)
		}
	}
}

// TestServerEventRoundTrip: every act of the record, written as a line of
// lockserver.edn, reads back as the event it was, node name and all.
func TestServerEventRoundTrip(t *testing.T) {
	evs := []ServerEvent{
		{Time: 10, Node: "redis-0", Act: SGrant, Key: "k", Token: "a9", Client: "worker-1", Deadline: 510, Command: `SET k a9 NX PX 500`, Until: Unset, NodeTime: Unset},
		{Time: 10, Node: "zk-0", Act: SGrant, Key: "/k", Token: "/k/a9", Client: "worker-1", Deadline: Unset, Until: Unset, NodeTime: Unset, Uncertainty: 27_000, ExpiryGrain: 100_000_000},
		{Time: 11, Node: "redis-0", Act: SRefuse, Key: "k", Token: "a9", Client: "worker-2", Deadline: Unset, Until: Unset, NodeTime: Unset, Guess: true},
		{Time: 12, Node: "redis-1", Act: SRenew, Key: "k", Token: "a9", Client: "", Deadline: 900, Until: Unset, NodeTime: 13, Uncertainty: 46_000_000},
		{Time: 13, Node: "redis-1", Act: SOverwrite, Key: "k", Token: "b", Was: "a9", Client: "worker-0", Deadline: Unset, Until: Unset, NodeTime: Unset},
		{Time: 14, Node: "etcd-0", Act: SDelete, Key: "/p", Token: "/p/1", Client: ClientPrimary, Deadline: Unset, Until: Unset, NodeTime: Unset},
		{Time: 15, Node: "redis-0", Act: SExpire, Key: "k", Token: "b", Deadline: 15, Until: Unset, NodeTime: Unset},
		{Time: 16, Node: "redis-run", Act: SFence, Key: "f", Fence: 7, Client: "worker-2", Deadline: Unset, Until: Unset, NodeTime: Unset},
		{Time: 17, Node: "redis-2", Act: SGap, Key: "k", Reason: "EOF", Deadline: Unset, Until: 90, NodeTime: Unset},
	}
	var b []byte
	for i := range evs {
		evs[i].Index = int64(i)
		b = append(AppendServerEvent(b, evs[i]), '\n')
	}
	r := NewServerReader(strings.NewReader(string(b)), "lockserver.edn")
	for i, want := range evs {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got != want {
			t.Errorf("event %d: read %+v, wrote %+v", i, got, want)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}
}

// TestServerEventRefused: what is no event of the record is refused,
// saying which op and why.
func TestServerEventRefused(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{:index 0, :time 1, :type :ok, :process "redis-0", :f :grant}`, "is :info"},
		{`{:index 0, :time 1, :type :info, :process "redis-0", :f :acquire}`, "no act"},
		{`{:index 0, :time 1, :type :info, :process 3, :f :grant}`, "names its node"},
		{`{:index 0, :type :info, :process "redis-0", :f :grant}`, "needs its :time"},
		{`{:index 0, :time 1, :type :info, :process "redis-0", :f :fence, :value "7"}`, "an integer"},
		{`{:index 0, :time 1, :type :info, :process "redis-0", :f :grant, :token 5}`, ":token 5 is not a string"},
		{`{:index 0, :time 1, :type :info, :process "redis-0", :f :grant, :deadline "x"}`, "not an integer"},
		{`{:index 0, :time 1, :type :info, :process "redis-0", :f :grant, :guess 1}`, ":guess 1 is not true or false"},
		{`{:index 0, :time 1, :type :info, :process "redis-0", :f :grant, :uncertainty -5}`, ":uncertainty -5 is negative"},
		{`{:index 0, :time 1, :type :info, :process "redis-0", :f :grant, :uncertainty 1.5}`, ":uncertainty 1.5 is not an integer"},
		{`{:index 0, :time 1, :type :info, :process "zk-0", :f :grant, :expiry-grain -1}`, ":expiry-grain -1 is negative"},
	} {
		_, err := NewServerReader(strings.NewReader(c.line), "f").Next()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.line, err, c.want)
		}
	}
}
