// Package server is the storage node's protocol listener: it accepts TCP
// connections from frontends, consumers and (later) follower replicas, reads
// frames, and serves Produce, Fetch and ListOffsets against the node's replicas.
//
// Per connection, one goroutine reads requests. Produce is appended inline, so
// two produce requests pipelined on one connection are appended in the order
// they were sent; only the wait for durability (acks=all) continues in its own
// goroutine. Fetch runs in its own goroutine because it may long-poll. Responses
// may leave out of order; correlation ids match them. A bounded number of
// requests may be in flight per connection: the reader stops reading when the
// bound is reached (back-pressure instead of unbounded memory).
//
// Fetch responses are the frame header written straight to the socket followed
// by the segment bytes sent with sendfile(2) at an explicit file offset, so
// record data is never copied into user space and concurrent fetches of one
// segment do not share a file position.
//
// Errors: a request whose header decodes but whose body or content is bad gets
// an error response with a code and a reason, and the connection stays open. A
// frame that cannot be cut or whose header cannot be decoded gets a
// MALFORMED_FRAME response with correlation id 0 and the connection is closed,
// since the stream can no longer be trusted.
package server
