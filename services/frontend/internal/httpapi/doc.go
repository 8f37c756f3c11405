// Package httpapi is the frontend's public HTTP API, served by fasthttp with a
// router written over the request path:
//
//	POST   /v1/topics/{topic}/records?acks=all|leader|none   produce
//	POST   /v1/topics                                         create a topic
//	GET    /v1/topics                                         list topics
//	GET    /v1/topics/{topic}                                 describe a topic
//	DELETE /v1/topics/{topic}                                 delete a topic
//	GET    /v1/cluster[?since=V&wait_ms=W]                    cluster snapshot / watch
//
// The admin routes have the paths, bodies and JSON error bodies of the metadata
// service, so libs/cluster's Client may be pointed at a frontend. Every error
// answer is {"error_code":N,"error":"reason"} with N from the wire error table
// and the HTTP status mapped from it in one place (statusOf).
//
// Every request carries an id: the client's X-Request-Id when usable, else a
// generated one; it is echoed in the response and named in log lines.
//
// Invariants: a handler never panics on input (a recovered bug answers 500);
// the server holds no state between requests beyond the metadata cache; Stop
// ends long-polls at once and lets produce requests in progress finish.
package httpapi
