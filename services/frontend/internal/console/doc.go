// Package console is the frontend's read-only web console, served under
// /console on the public HTTP listener: cluster health, topics with their
// partitions (leader, leader epoch, replicas, ISR, log range, high watermark,
// size), and consumer groups with their lag.
//
// Pages:
//
//   - /console: the metadata leader, the storage nodes (alive of registered,
//     with addresses), partition counts (under-replicated, offline) and every
//     topic with its partition count, replication factor, size and records;
//   - /console/topics/{name}: each partition and each replica of a topic;
//   - /console/groups: every consumer group with its state, members and
//     total lag;
//   - /console/groups/{name}: a group's partitions (committed offset, log
//     end, lag, owner) and members.
//
// Where the data comes from: the cluster model is the frontend's metadata
// cache (refreshed when older than a second); per-replica log ranges and
// sizes come from the storage nodes (DescribeReplicas over the storage
// protocol); groups, committed offsets and lag from the offsets service,
// which computes lag itself (log end minus committed offset).
//
// Choices:
//
//   - Pages are rendered on the server with html/template from templates
//     embedded in the binary. They carry their CSS inline and load nothing
//     else: no script, no image, no font, nothing from the internet (the
//     Content-Security-Policy header forbids it, so a template change that
//     adds an external asset breaks visibly).
//   - "Live" is a <meta http-equiv="refresh"> that reloads the page every
//     Config.Refresh (5 s by default): no JavaScript, it works in any
//     browser and in text browsers, and each reload shows a consistent
//     server-side view. The price is a full page load per refresh, which
//     for pages of this size is small.
//   - The console only reads: GET and HEAD; any other method gets 405.
//
// Invariants: every look-up a page makes is bounded by Config.LookupTimeout,
// so a page never hangs on a backend; a backend that fails or does not answer
// in time is named in an error banner on a page that still renders what the
// others gave (HTTP 200), or, when the page's main source failed, on an error
// page with status 503 (never a 500 without a reason); an unknown topic or
// group is a 404 page that says so. Goroutines a page starts for parallel
// look-ups end before its handler returns.
package console
