package topology

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
)

// A Host is a machine of the test: where a server or a worker runs, and
// whose network the nemesis can cut. Those of this machine (Local, a
// NetnsHost) also have a Command that runs there; an SSHHost starts its
// processes with Start.
type Host interface {
	Name() string
	// IP is the address other hosts reach it at.
	IP() string
	// Isolate drops every packet between the host and peers, both ways, as
	// a partition does: connections stall, dials time out. Isolating from a
	// peer already isolated does nothing.
	Isolate(ctx context.Context, peers ...Host) error
	// Heal removes what this host's Isolate calls added between it and
	// peers, or all of it when no peer is named: another fault's cut of
	// the host stays when only peers are healed.
	Heal(ctx context.Context, peers ...Host) error
}

// ErrNeedsNamespaces is the error of what needs hosts in network
// namespaces where they cannot be had: not root, no iproute2 or iptables,
// or an Isolate of Local.
var ErrNeedsNamespaces = errors.New("topology: partitions between hosts need network namespaces, which need root, ip (iproute2) and iptables")

// Local is the machine itself, with no network of its own to cut.
type Local struct{}

// Name is "local".
func (Local) Name() string { return "local" }

// IP is 127.0.0.1.
func (Local) IP() string { return "127.0.0.1" }

// Command runs name on this machine.
func (Local) Command(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }

// Isolate returns ErrNeedsNamespaces: the machine cannot be cut from itself.
func (Local) Isolate(context.Context, ...Host) error {
	return fmt.Errorf("%w: the local host cannot be isolated; put the hosts on a Net", ErrNeedsNamespaces)
}

// Heal does nothing.
func (Local) Heal(context.Context, ...Host) error { return nil }

// A Peer is a machine a host may be cut from, by the host's own rules,
// and that cannot be cut itself: over SSH, the control machine.
type Peer struct{ name, ip string }

// NewPeer is the machine called name at ip.
func NewPeer(name, ip string) Peer { return Peer{name, ip} }

// Name is its name.
func (p Peer) Name() string { return p.name }

// IP is its address.
func (p Peer) IP() string { return p.ip }

// Isolate fails: only its peers can cut it off.
func (p Peer) Isolate(context.Context, ...Host) error {
	return fmt.Errorf("topology: %s cannot be isolated by rules of its own; isolate its peers from it", p.name)
}

// Heal does nothing: Isolate added nothing.
func (Peer) Heal(context.Context, ...Host) error { return nil }
