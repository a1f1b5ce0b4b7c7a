// Package browser starts headless Chromium for the tests of hiatus's web
// pages (the timeline, `hiatus serve`), driven through the DevTools
// protocol by chromedp: real layout, real scripts, real events. A test
// that needs it fails, loudly, on a machine without Chromium: scripts/setup
// --tests installs it.
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
)

// A T is what the helpers need of a test: testing.TB's methods they call.
// The package takes it rather than import testing, which it would then
// register its flags in any program that imported it.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// Path returns the Chromium binary, failing t when there is none.
func Path(t T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("this test needs a real browser: install chromium (scripts/setup --tests does)")
	return ""
}

// Flags are the command-line flags every headless Chromium of the tests
// gets: nothing reaches for the network but the page (a closed network
// refuses the rest, and slowly), and each browser a profile of its own.
func Flags(profile string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile}
}

// New starts a headless Chromium with a window of width × height and
// returns a context whose chromedp actions drive its first tab. The browser
// and its profile are gone when the test ends; every action fails after
// timeout.
func New(t T, width, height int, timeout time.Duration) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Path(t)), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		// Chromium keeps its singleton socket in a directory of TMPDIR's
		// that it never removes: the test's, so that it goes too.
		chromedp.Env("TMPDIR=" + t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc() // waits for the browser to exit
	})
	// Start the browser now, so that a missing library fails here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// Screenshot saves what ctx's tab shows as name.png, in the directory
// HIATUS_SCREENSHOTS names (to keep it) or in the test's temporary one, and
// logs the path: what a person would have seen, beside the test's verdict.
func Screenshot(ctx context.Context, t T, name string) {
	t.Helper()
	dir := os.Getenv("HIATUS_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG, not JPEG
	path := filepath.Join(dir, name+".png")
	if err == nil {
		err = os.WriteFile(path, shot, 0o644)
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	t.Logf("screenshot: %s", path)
}
