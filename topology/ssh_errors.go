package topology

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// checkHostKey is check, knownhosts' check of node's known_hosts file,
// with its refusals told as what to do about them: a key the file does not
// hold is added with ssh-keyscan (once it is known to be the node's), and
// one that differs from the file's is either a new key of the node's or
// someone in the middle. knownhosts' own words name neither the file (it
// reads a private copy, knownHosts) nor the remedy.
func checkHostKey(node Node, check ssh.HostKeyCallback) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			return err
		}
		_, port, _ := net.SplitHostPort(node.Addr) // the inventory gives every address its port
		file := shellquote.Quote(node.KnownHosts)
		scan := fmt.Sprintf("ssh-keyscan -p %s -H %s >> %s", port, node.IP(), file)
		got := key.Type() + " " + ssh.FingerprintSHA256(key)
		if len(ke.Want) == 0 {
			return fmt.Errorf("its host key (%s) is not in known-hosts %s: if it is the node's (check the fingerprint on the node: ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub), add it with `%s`",
				got, node.KnownHosts, keyFileType(key), scan)
		}
		var lines []string
		for _, w := range ke.Want {
			lines = append(lines, fmt.Sprintf("line %d (%s %s)", w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key)))
		}
		return fmt.Errorf("its host key (%s) is not the one known-hosts %s holds for it at %s: someone may be in the middle; if the node's key was changed, remove the old with `ssh-keygen -R %s -f %s` and add the new with `%s`",
			got, node.KnownHosts, strings.Join(lines, ", "), shellquote.Quote(knownhosts.Normalize(node.Addr)), file, scan)
	}
}

// keyFileType is the name sshd's host key file of key's type carries
// (ssh_host_ed25519_key, ssh_host_rsa_key, ...).
func keyFileType(key ssh.PublicKey) string {
	switch key.Type() {
	case ssh.KeyAlgoED25519:
		return "ed25519"
	case ssh.KeyAlgoRSA:
		return "rsa"
	default:
		return "ecdsa"
	}
}

// loginRefused says what a refused login means: sshd took neither the key
// for the user. x/crypto/ssh says so in words only ("unable to
// authenticate"), with no error of its own to test for.
func loginRefused(node Node, err error) error {
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		return err
	}
	return fmt.Errorf("%w: the node refused user %s with key %s: is its public key (ssh-keygen -y -f %s) in ~%s/.ssh/authorized_keys on the node, and is %s the user?",
		err, node.User, node.Key, node.Key, node.User, node.User)
}
