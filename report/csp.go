package report

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
)

// CSPHash is the Content-Security-Policy source that allows an inline
// script or style element, or a style attribute, whose text is exactly
// text.
func CSPHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// TimelineCSP returns a Content-Security-Policy under which timeline.html,
// as this hiatus writes it, works and no other script runs: it allows, by
// their hashes, the page's one inline script (timeline.js; the history is
// a JSON data block, never run), its inline style, and the style
// attributes its legend's swatches get, one a colour of timeline.js's
// COLOR table; it loads nothing. A timeline written by a hiatus whose
// timeline.js differs runs no script under it; `hiatus timeline` re-makes
// one.
func TimelineCSP() string {
	style := []string{CSPHash(timelineCSS)}
	if table := regexp.MustCompile(`(?s)const COLOR = \{(.*?)\};`).FindStringSubmatch(timelineJS); table != nil {
		style = append(style, "'unsafe-hashes'")
		for _, c := range regexp.MustCompile(`\w+: "([^"]*)"`).FindAllStringSubmatch(table[1], -1) {
			style = append(style, CSPHash("background:"+c[1]))
		}
	}
	return "default-src 'none'; script-src " + CSPHash(timelineJS) + "; style-src " + strings.Join(style, " ") +
		"; base-uri 'none'; form-action 'none'"
}
