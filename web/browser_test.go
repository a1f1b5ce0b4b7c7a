package web

import (
	"cmp"
	"context"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hiatus-dev/hiatus/internal/browser"
)

// browse loads url in ctx's tab, saves a screenshot of it as name, and
// returns the DOM it built.
func browse(ctx context.Context, t *testing.T, url, name string) string {
	t.Helper()
	err := chromedp.Do(ctx, chromedp.Navigate(url))
	dom, err2 := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err = cmp.Or(err, err2); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	browser.Screenshot(ctx, t, name)
	return dom
}

// TestPagesInBrowser: in a real browser, the index shows the run with its
// verdict coloured and its figures, and a run's page its explanation as
// text — a script in a history's words is shown, never run — and its
// timeline, drawn.
func TestPagesInBrowser(t *testing.T) {
	srv, run := serveFixture(t)
	ctx := browser.New(t, 1200, 1600, 2*time.Minute)
	for _, tc := range []struct {
		path, name string
		want       []string
		not        []string
		painted    string // a verdict cell and its colour, as the browser paints it
	}{
		{"/", "index", []string{`<td class="verdict false">false</td>`, "writes 347, lost 4, overlapping-sections 46",
			`href="/run/` + run + `"`, `href="/file/` + run + `/timeline.html"`}, nil, "false rgb(246, 176, 173)"},
		{"/run/compare/20261201T085208.487Z", "comparison", []string{"compare-setnx-3.2s-sigstop"}, nil, "true rgb(173, 246, 176)"},
		{"/run/" + run, "run", []string{`<span class="verdict false">lock-counter</span> 4 updates lost &lt;script&gt;alert(1)&lt;/script&gt;`,
			`<img src="/file/` + run + `/rate.png"`, `<iframe class="timeline" src="/file/` + run + `/timeline.html"`}, []string{"<script>alert"}, ""},
	} {
		dom := browse(ctx, t, srv.URL+tc.path, tc.name)
		contains(t, tc.path+" in the browser", dom, tc.want, tc.not)
		if tc.painted == "" {
			continue
		}
		painted, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll("td.verdict")].map(td => td.textContent + " " + getComputedStyle(td).backgroundColor)`))
		if err != nil || !slices.Contains(painted, tc.painted) {
			t.Errorf("%s: the verdicts are painted %q (%v), want %q", tc.path, painted, err, tc.painted)
		}
	}
	// The run page's timeline is the real page, drawn inside it.
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	drawn, err := chromedp.Run(short, chromedp.Poll[int](
		`(document.querySelector("iframe.timeline").contentWindow.timeline || {}).sections`))
	if err != nil || drawn == 0 {
		t.Errorf("the run page's timeline drew %d sections: %v", drawn, err)
	}
}

// TestCSPInBrowser: in a real browser, under the Content-Security-Policy
// serve sends, a timeline hiatus made runs its script and colours its
// legend (inside its run's page too: TestPagesInBrowser), while a page
// planted in the store (HTML, SVG, HTML without a name that says so) shows
// but runs no script of its own, inline or in an attribute.
func TestCSPInBrowser(t *testing.T) {
	root, run := fixture(t)
	const ran = `document.documentElement.setAttribute("data-ran", "yes")`
	planted := []string{"planted.html", "planted.svg", "planted"}
	for name, page := range map[string]string{
		planted[0]: `<!doctype html><title>planted</title><p>planted</p><script>` + ran + `</script><img src="x" onerror='` + ran + `'>`,
		planted[1]: `<svg xmlns="http://www.w3.org/2000/svg"><script>` + ran + `</script></svg>`,
		planted[2]: `<!doctype html><html><p>planted</p><script>` + ran + `</script></html>`,
	} {
		mkfile(t, filepath.Join(root, run, name), page)
	}
	srv := httptest.NewServer(newHandler(t, root))
	t.Cleanup(srv.Close)
	ctx := browser.New(t, 1200, 900, 2*time.Minute)

	browse(ctx, t, srv.URL+"/file/"+run+"/timeline.html", "timeline-alone")
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	drawn, err := chromedp.Run(short, chromedp.Poll[int](`(window.timeline || {}).sections`))
	if err != nil || drawn == 0 {
		t.Errorf("the timeline on its own drew %d sections: %v", drawn, err)
	}
	swatches, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#legend i")].map(i => getComputedStyle(i).backgroundColor)`))
	if err != nil || len(swatches) == 0 || slices.Contains(swatches, "rgba(0, 0, 0, 0)") {
		t.Errorf("the timeline's legend is painted %q (%v), want every swatch coloured", swatches, err)
	}

	for _, name := range planted {
		browse(ctx, t, srv.URL+"/file/"+run+"/"+name, name)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.getAttribute("data-ran") || ""`))
		if err != nil || got != "" {
			t.Errorf("%s: a planted script ran (%q, %v)", name, got, err)
		}
	}
}
