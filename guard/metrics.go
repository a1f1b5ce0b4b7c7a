package guard

import (
	"errors"
	"expvar"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics' names.
const (
	AttemptsName   = "guard_attempts_total"
	RejectionsName = "guard_rejections_total"
)

// The op label's values: which guarded statement was sent.
const (
	opWrite = "write"
	opRead  = "read" // FenceRMW's reads alone are guarded
)

// Metrics counts a service's guarded statements, by lock:
//
//	guard_attempts_total{lock, guard, op}           guarded writes (and fence-rmw reads) sent
//	guard_rejections_total{lock, guard, op, reason} those the guard refused: reason stale-fence or value-changed
//
// A rejection is a holder that wrote after its lock had been granted to
// another: each one is a lost update the guard prevented. A nil *Metrics,
// or one not made by NewMetrics (a zero Metrics), counts nothing.
type Metrics struct {
	attempts, rejections *prometheus.CounterVec
	own                  *prometheus.Registry // the same counters, for Expvar
}

// NewMetrics makes the counters and registers them with reg, the
// service's own registry (prometheus.DefaultRegisterer if it serves that
// one). Registered a second time with the same reg, it counts on the
// counters registered first.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if isNil(reg) { // a nil *prometheus.Registry too: its Register would panic
		return nil, errors.New("guard: NewMetrics needs a prometheus.Registerer, not nil")
	}
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: AttemptsName,
			Help: "Guarded writes (and fence-rmw reads) sent, by lock, guard and op."}, []string{"lock", "guard", "op"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RejectionsName,
			Help: "Guarded writes (and fence-rmw reads) the guard refused: a holder that wrote after its lock was granted to another."},
			[]string{"lock", "guard", "op", "reason"}),
		own: prometheus.NewRegistry(),
	}
	for _, c := range []**prometheus.CounterVec{&m.attempts, &m.rejections} {
		err := reg.Register(*c)
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				*c, err = existing, nil
			}
		}
		if err != nil {
			return nil, err
		}
	}
	m.own.MustRegister(m.attempts, m.rejections)
	return m, nil
}

// counting says whether m counts: made by NewMetrics, which sets all its
// fields. (A Guard's labels are valid, Guard.check: WithLabelValues cannot
// panic.)
func (m *Metrics) counting() bool { return m != nil && m.own != nil }

func (m *Metrics) attempt(g Guard, op string) {
	if m.counting() {
		m.attempts.WithLabelValues(g.Lock, string(g.Kind), op).Inc()
	}
}

func (m *Metrics) reject(g Guard, op string) {
	if m.counting() {
		m.rejections.WithLabelValues(g.Lock, string(g.Kind), op, g.Kind.reason()).Inc()
	}
}

// Expvar returns the counts as an expvar.Var, for a service that serves
// /debug/vars rather than Prometheus: publish it under a name of its own
// (expvar.Publish("guard", m.Expvar())). Its value is a map from each
// series, as name{label="value",…}, to its count: empty for a Metrics
// that counts nothing (nil, or not made by NewMetrics).
func (m *Metrics) Expvar() expvar.Var {
	return expvar.Func(func() any {
		out := map[string]float64{}
		if !m.counting() {
			return out
		}
		mfs, err := m.own.Gather()
		if err != nil {
			return out
		}
		for _, mf := range mfs {
			for _, s := range mf.GetMetric() {
				var ls []string
				for _, l := range s.GetLabel() {
					ls = append(ls, l.GetName()+"="+`"`+l.GetValue()+`"`)
				}
				slices.Sort(ls)
				out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = s.GetCounter().GetValue()
			}
		}
		return out
	})
}
