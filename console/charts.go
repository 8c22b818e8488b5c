package console

import (
	"math"
	"slices"
	"time"
)

// Chart ranges: how far back, and the width of one point.
var chartRanges = map[string]struct{ span, bin time.Duration }{
	"hour": {time.Hour, time.Minute},
	"day":  {24 * time.Hour, 15 * time.Minute},
	"week": {7 * 24 * time.Hour, time.Hour},
}

// maxChartTools is how many tools (the busiest) get their own duration
// series; the rest are summed in the totals only.
const maxChartTools = 6

// Histogram buckets: durations on a log scale, 10% apart, from 10 µs to
// about 3 hours, so a percentile costs bounded memory and is within 10%.
const (
	histMin     = 0.01 // ms
	histGrowth  = 1.1
	histBuckets = 220
)

type hist struct {
	n [histBuckets]uint32
	t uint32
}

func (h *hist) add(ms float64) {
	i := 0
	if ms > histMin {
		i = min(histBuckets-1, int(math.Log(ms/histMin)/math.Log(histGrowth))+1)
	}
	h.n[i]++
	h.t++
}

// quantile returns the upper bound of the bucket holding the q-quantile.
func (h *hist) quantile(q float64) float64 {
	if h.t == 0 {
		return math.NaN()
	}
	want := uint32(math.Ceil(q * float64(h.t)))
	want = max(want, 1)
	var seen uint32
	for i, n := range h.n {
		seen += n
		if seen >= want {
			if i == 0 {
				return histMin
			}
			return histMin * math.Pow(histGrowth, float64(i))
		}
	}
	return math.NaN()
}

// ToolStats summarises one tool's calls over a chart's range.
type ToolStats struct {
	Tool      string  `json:"tool"`
	Calls     int     `json:"calls"`
	Errors    int     `json:"errors"`
	ErrorRate float64 `json:"error_rate"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
}

// ChartData is what the charts page draws: one point per bin.
type ChartData struct {
	Range string `json:"range"`
	// Times are the bins' starts, in Unix seconds.
	Times []int64 `json:"times"`
	// PerMinute is calls per minute in each bin; ErrorRate the share of
	// calls that failed, in percent (null for a bin without calls).
	PerMinute []float64  `json:"per_minute"`
	ErrorRate []*float64 `json:"error_rate"`
	// P50 and P99 are the busiest tools' durations in ms, per bin (null
	// where the tool had no call).
	Tools []string     `json:"tools"`
	P50   [][]*float64 `json:"p50"`
	P99   [][]*float64 `json:"p99"`
	// Stats cover the whole range, busiest tool first.
	Stats []ToolStats `json:"stats"`
	Calls int         `json:"calls"`
}

// chartAgg folds calls into bins, then into a ChartData.
type chartAgg struct {
	start time.Time
	bin   time.Duration
	n     int
	calls []int
	errs  []int
	tools map[string]*toolAgg
}

type toolAgg struct {
	total  hist
	calls  int
	errors int
	bins   map[int]*hist
}

func newChartAgg(now time.Time, rng string) *chartAgg {
	r := chartRanges[rng]
	n := int(r.span / r.bin)
	end := now.Truncate(r.bin).Add(r.bin)
	return &chartAgg{start: end.Add(-time.Duration(n) * r.bin), bin: r.bin, n: n, calls: make([]int, n), errs: make([]int, n), tools: map[string]*toolAgg{}}
}

func (a *chartAgg) add(c *Call) {
	if c.Time.Before(a.start) {
		return
	}
	i := int(c.Time.Sub(a.start) / a.bin)
	if i >= a.n {
		return
	}
	a.calls[i]++
	t := a.tools[c.Tool]
	if t == nil {
		t = &toolAgg{bins: map[int]*hist{}}
		a.tools[c.Tool] = t
	}
	t.calls++
	if c.Outcome != "ok" {
		a.errs[i]++
		t.errors++
	}
	t.total.add(c.DurationMS)
	h := t.bins[i]
	if h == nil {
		h = new(hist)
		t.bins[i] = h
	}
	h.add(c.DurationMS)
}

func (a *chartAgg) data(rng string) *ChartData {
	d := &ChartData{Range: rng, Times: make([]int64, a.n), PerMinute: make([]float64, a.n), ErrorRate: make([]*float64, a.n)}
	mins := a.bin.Minutes()
	for i := range a.n {
		d.Times[i] = a.start.Add(time.Duration(i) * a.bin).Unix()
		d.PerMinute[i] = float64(a.calls[i]) / mins
		d.Calls += a.calls[i]
		if a.calls[i] > 0 {
			r := 100 * float64(a.errs[i]) / float64(a.calls[i])
			d.ErrorRate[i] = &r
		}
	}
	for name, t := range a.tools {
		d.Stats = append(d.Stats, ToolStats{Tool: name, Calls: t.calls, Errors: t.errors, ErrorRate: 100 * float64(t.errors) / float64(t.calls), P50: t.total.quantile(0.5), P99: t.total.quantile(0.99)})
	}
	slices.SortFunc(d.Stats, func(x, y ToolStats) int {
		if x.Calls != y.Calls {
			return y.Calls - x.Calls
		}
		if x.Tool < y.Tool {
			return -1
		}
		return 1
	})
	for _, s := range d.Stats[:min(len(d.Stats), maxChartTools)] {
		t := a.tools[s.Tool]
		p50, p99 := make([]*float64, a.n), make([]*float64, a.n)
		for i, h := range t.bins {
			v50, v99 := h.quantile(0.5), h.quantile(0.99)
			p50[i], p99[i] = &v50, &v99
		}
		d.Tools = append(d.Tools, s.Tool)
		d.P50 = append(d.P50, p50)
		d.P99 = append(d.P99, p99)
	}
	return d
}
