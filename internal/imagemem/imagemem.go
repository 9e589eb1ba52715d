// Package imagemem gives back the resident pages of drover's own
// executable image that the process no longer needs.
//
// Every package linked into the drover binary runs its initialisation
// before main, touching pages of code and read-only data all over the
// image, and the kernel maps up to 64 KiB around each page touched
// (fault-around). Those pages count in the process's resident set for
// as long as it lives although most are never used again: for `drover
// run`, whose image also holds the server, the workers, the PostgreSQL
// ledger and the MCP server, that was a quarter of its peak
// (docs/performance.md). Release unmaps them; the pages a process goes
// on to use are mapped again from the page cache on their next touch (a
// minor fault, no I/O), so nothing changes but the resident set.
package imagemem

// KeepEnv, set to anything in the environment, keeps Release from
// releasing anything.
const KeepEnv = "DROVER_KEEP_IMAGE"
