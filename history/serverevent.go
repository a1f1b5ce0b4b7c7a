package history

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/hiatus-dev/hiatus/internal/files"
)

// A ServerEvent is one event of the lock server's record (lockserver.edn),
// typed: what a lock node did to the lock's key, when, on whose word.
type ServerEvent struct {
	Index int64
	Time  int64   // ns since the run's start, on the history's clock
	Node  string  // the lock node, the op's :process: "redis-0"
	Act   Keyword // one of ServerActs
	Key   string
	Token string // the token the act is about; "" for none
	// Client is the connection that acted ("worker-3", ClientPrimary,
	// ClientRun, "" when unnamed); Clientless acts (an expiry, a gap)
	// have none.
	Client   string
	Deadline int64  // when the key expires unless renewed (history ns); Unset for never or not said
	Was      string // an overwrite's old token
	Fence    int64  // a :fence's token (its :value)
	Reason   string // a :gap's :value
	Until    int64  // a :gap's end (history ns); Unset when sight never came back
	Command  string // as the server logged it; "" when it logged none
	NodeTime int64  // the node's own clock at the event (ns since the run's start); Unset when it is the history's
	Guess    bool   // the record's guess (KeyGuess)
	// Uncertainty is how far Time may be from when the node acted (ns,
	// KeyUncertainty); 0 when not said.
	Uncertainty int64
	// ExpiryGrain is how long past its lease the server may keep the key
	// a grant gave (ns, KeyExpiryGrain); 0 when not said.
	ExpiryGrain int64
}

// ServerEventOf reads an op of a lock server's record, whose :process is
// written node (Reader.Processes says how), as a ServerEvent.
func ServerEventOf(o Op, node string) (ServerEvent, error) {
	e := ServerEvent{Index: o.Index, Time: o.Time, Node: node, Act: o.F, Deadline: Unset, Until: Unset, NodeTime: Unset}
	switch {
	case o.Type != Info:
		return e, fmt.Errorf("op %d: a server event is :info, not :%s", o.Index, o.Type)
	case !slices.Contains(ServerActs(), o.F):
		return e, fmt.Errorf("op %d: :f :%s is no act of a lock server (want one of %v)", o.Index, o.F, ServerActs())
	case node == "":
		return e, fmt.Errorf("op %d: a server event's :process names its node, as a string", o.Index)
	case o.Time == Unset:
		return e, fmt.Errorf("op %d: a server event needs its :time", o.Index)
	}
	var err error
	str := func(k Keyword, p *string) {
		if v, ok := o.Extra[k]; ok && err == nil {
			s, ok := v.(string)
			if !ok {
				err = fmt.Errorf("op %d: :%s %s is not a string", o.Index, k, AppendValue(nil, v))
			}
			*p = s
		}
	}
	num := func(k Keyword, p *int64) {
		if v, ok := o.Extra[k]; ok && err == nil {
			n, ok := Int(v)
			if !ok {
				err = fmt.Errorf("op %d: :%s %s is not an integer", o.Index, k, AppendValue(nil, v))
			}
			*p = n
		}
	}
	str(KeyKey, &e.Key)
	str(KeyToken, &e.Token)
	str(KeyClient, &e.Client)
	str(KeyWas, &e.Was)
	str(KeyCommand, &e.Command)
	num(KeyDeadline, &e.Deadline)
	num(KeyUntil, &e.Until)
	num(KeyNodeTime, &e.NodeTime)
	num(KeyUncertainty, &e.Uncertainty)
	num(KeyExpiryGrain, &e.ExpiryGrain)
	for k, v := range map[Keyword]int64{KeyUncertainty: e.Uncertainty, KeyExpiryGrain: e.ExpiryGrain} {
		if v < 0 && err == nil {
			err = fmt.Errorf("op %d: :%s %d is negative", o.Index, k, v)
		}
	}
	if v, ok := o.Extra[KeyGuess]; ok && err == nil {
		if e.Guess, ok = v.(bool); !ok {
			err = fmt.Errorf("op %d: :%s %s is not true or false", o.Index, KeyGuess, AppendValue(nil, v))
		}
	}
	if err != nil {
		return e, err
	}
	switch o.F {
	case SFence:
		n, ok := Int(o.Value)
		if !ok {
			return e, fmt.Errorf("op %d: a :fence's :value is its token, an integer, not %s", o.Index, AppendValue(nil, o.Value))
		}
		e.Fence = n
	case SGap:
		e.Reason, _ = o.Value.(string)
	}
	return e, nil
}

// Op is e as an op of the record, its :process left 0: AppendServerEvent
// writes it with its node's name.
func (e ServerEvent) Op() Op {
	o := Op{Index: e.Index, Time: e.Time, Type: Info, F: e.Act, Extra: map[Keyword]any{}}
	put := func(k Keyword, v string) {
		if v != "" {
			o.Extra[k] = v
		}
	}
	put(KeyKey, e.Key)
	put(KeyToken, e.Token)
	put(KeyWas, e.Was)
	put(KeyCommand, e.Command)
	if e.Act != SExpire && e.Act != SGap {
		o.Extra[KeyClient] = e.Client
	}
	for k, v := range map[Keyword]int64{KeyDeadline: e.Deadline, KeyUntil: e.Until, KeyNodeTime: e.NodeTime} {
		if v != Unset {
			o.Extra[k] = v
		}
	}
	if e.Guess {
		o.Extra[KeyGuess] = true
	}
	for k, v := range map[Keyword]int64{KeyUncertainty: e.Uncertainty, KeyExpiryGrain: e.ExpiryGrain} {
		if v > 0 {
			o.Extra[k] = v
		}
	}
	switch e.Act {
	case SFence:
		o.Value = e.Fence
	case SGap:
		o.Value = e.Reason
	}
	return o
}

// AppendServerEvent appends e to dst as one line of lockserver.edn,
// without the newline: an op map whose :process is its node's name.
func AppendServerEvent(dst []byte, e ServerEvent) []byte {
	return appendOp(dst, e.Op(), e.Node)
}

// A ServerReader reads a lock server's record one event at a time.
type ServerReader struct {
	r       *Reader
	names   map[Process]string
	decoded map[Process]string // names' nodes, decoded: each once, not at every event
}

// NewServerReader returns a reader of the record in r; name, usually the
// file's path, prefixes its errors.
func NewServerReader(r io.Reader, name string) *ServerReader {
	return &ServerReader{r: NewReader(r, name)}
}

// Next returns the next event, or io.EOF at the record's clean end.
func (s *ServerReader) Next() (ServerEvent, error) {
	o, err := s.r.Next()
	if err != nil {
		return ServerEvent{}, err
	}
	name, ok := s.decoded[o.Process]
	if !ok {
		name = s.node(o.Process)
	}
	e, err := ServerEventOf(o, name)
	if err != nil {
		return e, fmt.Errorf("%s: %w", s.r.name, err)
	}
	return e, nil
}

// node decodes the name of the node written as process p, and keeps it.
func (s *ServerReader) node(p Process) string {
	name, ok := s.names[p]
	if !ok {
		s.names = s.r.Processes()
		name = s.names[p]
	}
	if v, err := ParseValue(name); err == nil {
		name, _ = v.(string)
	}
	if s.decoded == nil {
		s.decoded = map[Process]string{}
	}
	s.decoded[p] = name
	return name
}

// ReadServerFile reads every event of the record file at path (a regular
// file: files.Open). On an error it returns the events before it.
func ReadServerFile(path string) ([]ServerEvent, error) {
	f, err := files.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := NewServerReader(f, path)
	var out []ServerEvent
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

// A ServerRecord is a run's lock server's record, read whole: its events
// in time order, and the nodes they are of.
type ServerRecord struct {
	Events []ServerEvent
	Nodes  []string // in the order of their first event
}

// ReadServerRecord reads the record file at path (lockserver.edn), as
// ReadServerFile does.
func ReadServerRecord(path string) (*ServerRecord, error) {
	evs, err := ReadServerFile(path)
	if err != nil {
		return nil, err
	}
	r := &ServerRecord{Events: evs}
	seen := map[string]bool{}
	for i, e := range evs {
		if i > 0 && e.Time < evs[i-1].Time {
			return nil, fmt.Errorf("%s: event %d at %d comes before the one before it, at %d: a record is sorted by :time", path, e.Index, e.Time, evs[i-1].Time)
		}
		if !seen[e.Node] {
			seen[e.Node] = true
			r.Nodes = append(r.Nodes, e.Node)
		}
	}
	return r, nil
}
