package drover

// ProcessObserver is told about every vendor process an adapter starts for
// a run: its pid and process group id. The supervisor records them so a
// later drover can kill what a dead one left behind (RUN-6). It must
// return quickly; it may be called from the adapter's goroutine, and a
// run may start more than one process (the resume fallback does).
type ProcessObserver func(pid, pgid int)
