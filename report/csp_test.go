package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/internal/gen"
)

// TestTimelineCSP: the policy allows the very script and style a timeline
// carries, and the style attribute of each swatch of its legend, and
// nothing it does not need.
func TestTimelineCSP(t *testing.T) {
	ops, _, err := gen.Ops(gen.Config{Sections: 20, Workers: 2, Lost: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := timelineOf(ops, 2).WriteHTML(&buf, TimelinePage{Summary: Summary{Name: "</script><style>"}}); err != nil {
		t.Fatal(err)
	}
	policy := TimelineCSP()
	for _, tc := range []struct {
		tag  string
		want int
	}{{"script", 1}, {"style", 1}} {
		// Elements bearing no attribute: the JSON data block is never run.
		texts := regexp.MustCompile(`(?s)<`+tc.tag+`>(.*?)</`+tc.tag+`>`).FindAllStringSubmatch(buf.String(), -1)
		if len(texts) != tc.want {
			t.Fatalf("the page has %d inline %s elements, want %d", len(texts), tc.tag, tc.want)
		}
		if h := CSPHash(texts[0][1]); !strings.Contains(policy, tc.tag+"-src "+h) {
			t.Errorf("the page's %s (%s) is not the first source of %s-src in %q", tc.tag, h, tc.tag, policy)
		}
	}
	legend := `'<span><i style="background:' + c + '"></i>'`
	if !strings.Contains(timelineJS, legend) || !strings.Contains(policy, "'unsafe-hashes' "+CSPHash("background:#4a78b5")) {
		t.Errorf("the legend's swatches (%s, COLOR.bar #4a78b5) are not allowed by %q", legend, policy)
	}
	for _, not := range []string{"unsafe-inline", "unsafe-eval", "*", "data:", "http"} {
		if strings.Contains(policy, not) {
			t.Errorf("the policy allows %s: %q", not, policy)
		}
	}
	if !strings.HasPrefix(policy, "default-src 'none'; ") {
		t.Errorf("the policy does not start by refusing everything: %q", policy)
	}
}
