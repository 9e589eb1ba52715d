// Package metricstest scrapes and reads Prometheus metrics in tests
// (OBS-2): the exposition is parsed by prometheus/common's text parser,
// never by hand.
package metricstest

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Get GETs url with "Authorization: Bearer token" (none when token is
// ""), and returns the status and body.
func Get(t testing.TB, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Scrape GETs url as Get does, requires 200 and parses the body.
func Scrape(t testing.TB, url, token string) Families {
	t.Helper()
	code, body := Get(t, url, token)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	return Parse(t, body)
}

// Parse parses Prometheus's text exposition format.
func Parse(t testing.TB, text string) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("metrics do not parse: %v\n%s", err, text)
	}
	return fams
}

// Value is the value of the series of metric name whose labels are
// exactly labels (name, value pairs): a counter's or gauge's value, a
// histogram's count. ok is false when there is no such series.
func (f Families) Value(name string, labels ...string) (v float64, ok bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if sameLabels(m.GetLabel(), labels) {
			return value(m), true
		}
	}
	return 0, false
}

// Sum is the sum of the values of every series of metric name.
func (f Families) Sum(name string) float64 {
	var sum float64
	if fam := f[name]; fam != nil {
		for _, m := range fam.GetMetric() {
			sum += value(m)
		}
	}
	return sum
}

// Series returns metric name's series, each as its labels and value
// ("agent=a,outcome=completed 1"), sorted: what a failing test shows.
func (f Families) Series(name string) []string {
	var out []string
	if fam := f[name]; fam != nil {
		for _, m := range fam.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName()+"="+l.GetValue())
			}
			out = append(out, fmt.Sprintf("{%s} %g", strings.Join(kv, ","), value(m)))
		}
	}
	slices.Sort(out)
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func sameLabels(got []*dto.LabelPair, want []string) bool {
	if len(got)*2 != len(want) {
		return false
	}
	for i := 0; i+1 < len(want); i += 2 {
		if !slices.ContainsFunc(got, func(l *dto.LabelPair) bool { return l.GetName() == want[i] && l.GetValue() == want[i+1] }) {
			return false
		}
	}
	return true
}

// Poll calls scrape until cond holds of its families, or fails t after
// 10 s with what the last scrape said of the metrics named.
func Poll(t testing.TB, scrape func() Families, cond func(Families) bool, names ...string) Families {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := scrape()
		if cond(f) {
			return f
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, n := range names {
				b.WriteString(n + ": " + strings.Join(f.Series(n), " ") + "\n")
			}
			t.Fatalf("metrics never reached the expected values:\n%s", b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
