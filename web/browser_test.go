package web

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// chromium returns the path of the headless browser the page tests drive,
// failing the test, loudly, when there is none: scripts/setup installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the web page tests need a real browser: install chromium (scripts/setup does)")
	return ""
}

// browse loads url in headless Chromium and returns the DOM it built; with
// HIATUS_SCREENSHOTS set to a directory, it also saves a screenshot there
// under name and logs its path.
func browse(t *testing.T, url, name string) string {
	t.Helper()
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Each load gets a profile of its own, removed with the test; nothing
	// reaches for the network but the page (a closed network refuses the
	// rest, and slowly).
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1200,1600"}
	out, err := exec.CommandContext(ctx, bin, append(args, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", url, err)
	}
	if dir := os.Getenv("HIATUS_SCREENSHOTS"); dir != "" {
		shot := filepath.Join(dir, name+".png")
		if err := exec.CommandContext(ctx, bin, append(args, "--screenshot="+shot, url)...).Run(); err != nil {
			t.Errorf("screenshot of %s: %v", url, err)
		} else {
			t.Logf("screenshot: %s", shot)
		}
	}
	return string(out)
}

// TestPagesInBrowser: in a real browser, the index shows the run with its
// verdict coloured and its figures, and a run's page its explanation as
// text — a script in a history's words is shown, never run.
func TestPagesInBrowser(t *testing.T) {
	srv, run := serveFixture(t)
	for _, tc := range []struct {
		path, name string
		want       []string
		not        []string
	}{
		{"/", "index", []string{`<td class="verdict false">false</td>`, "writes 347, lost 4, overlapping-sections 46",
			`href="/run/` + run + `"`}, nil},
		{"/run/" + run, "run", []string{`<span class="verdict false">lock-counter</span> 4 updates lost &lt;script&gt;alert(1)&lt;/script&gt;`,
			`<img src="/file/` + run + `/rate.png"`}, []string{"<script>alert"}},
	} {
		dom := browse(t, srv.URL+tc.path, tc.name)
		contains(t, tc.path+" in the browser", dom, tc.want, tc.not)
	}
}
