package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"strconv"
	"syscall"
)

// StartEtcd starts a one-member etcd cluster on free loopback ports, its
// data in a private temporary directory. etcd is durable: it syncs each
// write to its log on disk before answering, and a restart after Crash
// keeps the same data directory, so every key survives — and every lease,
// which the restarted server renews to its full TTL (its leader is new).
// The server runs with etcd's default timings (heartbeat 100 ms, election
// 1 s), which put its shortest lease at 2 s.
func StartEtcd(ctx context.Context) (*Server, error) { return StartEtcdOn(ctx, nil) }

// StartEtcdOn starts etcd as StartEtcd does, on host h; nil for this
// machine.
func StartEtcdOn(ctx context.Context, h Host) (*Server, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("etcd: %w (on Debian: apt-get install etcd-server)", ErrMissing)
	}
	d, err := tempDir("hiatus-etcd-", nil)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	// The peer port is picked here, where its error can be returned, and
	// again with each try of launch, which picks a fresh client port for
	// each: a try that failed because another process took a port has both
	// afresh.
	peer, err := freePort()
	if err != nil {
		removeDir(d)
		return nil, fmt.Errorf("etcd: %w", err)
	}
	s := &Server{name: "etcd", host: h, bin: bin, dir: d.Path(), home: d, log: d.Join("etcd.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	// Keep-alives off: a connection kept over a crash would only fail the
	// next poll.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var url string
	s.ready = func(ctx context.Context) error { return etcdHealthy(ctx, hc, url) }
	data := d.Join("data")
	s, err = launch(ctx, s, func(port int) {
		if p, err := freePort(); err == nil {
			peer = p
		}
		// A try that failed may have left a member that knows the old
		// ports; a restart (not a try) keeps the directory.
		os.RemoveAll(data)
		url = etcdMember(s, s.ip(), port, peer, data)
	})
	if err != nil {
		removeDir(d)
		return nil, err
	}
	return s, nil
}

// StartEtcdOnNode starts etcd as StartEtcdOn does, on the node n, from
// its own etcd, listening on the node's address.
func StartEtcdOnNode(ctx context.Context, n Node) (*Server, error) {
	bin, err := lookOnNode(n, needEtcd)
	if err != nil {
		return nil, err
	}
	dir, err := nodeDir(n, "etcd", "")
	if err != nil {
		return nil, err
	}
	s := &Server{name: "etcd", node: n, bin: bin, dir: dir, log: path.Join(dir, "etcd.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var url string
	s.ready = func(ctx context.Context) error { return etcdHealthy(ctx, hc, url) }
	if _, err := launch(ctx, s, func(port int) {
		// Each try's member has a directory of its own, which a try that
		// failed cannot have left a member that knows other ports in; a
		// restart (not a try) keeps it.
		url = etcdMember(s, n.IP(), port, nodePort(), path.Join(dir, "data-"+strconv.Itoa(port)))
	}); err != nil {
		s.stopOnNode()
		return nil, err
	}
	return s, nil
}

// etcdMember sets s's URL, address and arguments for a member alone at ip,
// on the client port port and the peer port peer, its data in data, and
// returns its URL.
func etcdMember(s *Server, ip string, port, peer int, data string) string {
	url := fmt.Sprintf("http://%s:%d", ip, port)
	s.URL, s.Addr = url, net.JoinHostPort(ip, strconv.Itoa(port))
	peerURL := fmt.Sprintf("http://%s:%d", ip, peer)
	s.args = []string{
		"--name", "hiatus",
		"--data-dir", data,
		"--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "hiatus=" + peerURL, "--initial-cluster-state", "new",
		// etcd 3.4 logs with capnslog unless told otherwise; zap to
		// stderr, which start sends to the log file.
		"--logger", "zap", "--log-outputs", "stderr",
	}
	return url
}

// etcdHealthy asks etcd's /health endpoint, which says true only once the
// member has a leader and has served a read through it: once a client's
// requests can succeed.
func etcdHealthy(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return fmt.Errorf("GET %s/health: %s: %w", url, resp.Status, err)
	}
	if h.Health != "true" {
		return fmt.Errorf("GET %s/health: %s: health %q", url, resp.Status, h.Health)
	}
	return nil
}
