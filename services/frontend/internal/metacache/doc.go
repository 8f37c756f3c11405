// Package metacache keeps the frontend's copy of the cluster model.
//
// A Cache follows the metadata service with its versioned watch: one goroutine,
// started by Start and stopped (and waited for) by Stop, long-polls for a
// snapshot newer than the one it holds and swaps it in. Readers get the current
// snapshot and a routing view per topic (partition count and the internal
// address of each partition's leader) from an atomic pointer, without locks.
//
// Invariants:
//   - the held snapshot's version never goes backwards, except when the
//     metadata service answers with another cluster id (a new cluster), which
//     replaces the view whole;
//   - a view is immutable once published: a reader may keep a *Route for the
//     length of a request and never sees it change under it;
//   - the cache is only a cache: everything in it is fetched again after a
//     restart, so the frontend holds no state a restart would lose;
//   - Refresh calls made while one is in flight share it, so a burst of
//     NOT_LEADER answers costs the metadata service one request.
package metacache
