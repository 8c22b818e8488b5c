package edge

import (
	"sync/atomic"
	"time"
)

// Pool runs jobs on long-lived goroutines. A request served on a fresh
// goroutine grows its stack through mcp-go's depth every time (a stack
// copy or two per call, a fifth of a call's CPU in profiles); a pooled
// goroutine keeps its grown stack. Up to max workers stay around, each
// until it has been idle for idle; beyond that a job gets a goroutine of
// its own. Go never blocks, so a job waiting on the client (sampling)
// cannot hold up the one that would answer it.
type Pool struct {
	jobs    chan func()
	workers atomic.Int32
	max     int32
	idle    time.Duration
}

// NewPool makes a pool of at most max idle-bounded workers.
func NewPool(max int, idle time.Duration) *Pool {
	return &Pool{jobs: make(chan func()), max: int32(max), idle: idle}
}

// Go runs job.
func (p *Pool) Go(job func()) {
	select {
	case p.jobs <- job:
		return
	default:
	}
	if p.workers.Add(1) <= p.max {
		go p.work(job)
		return
	}
	p.workers.Add(-1)
	go job()
}

func (p *Pool) work(job func()) {
	defer p.workers.Add(-1)
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		job()
		t.Reset(p.idle)
		select {
		case job = <-p.jobs:
		case <-t.C:
			return
		}
	}
}
