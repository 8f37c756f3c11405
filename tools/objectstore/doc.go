// Package objectstore holds nothing: its module only pins the build of
// versitygw, the S3-compatible server that a local cluster (make run,
// libs/dev/localcluster and the integration tests) stores its tiered
// segments in. The server is the module's tool (go.mod's tool directive);
// build it with GOWORK=off so that its dependencies stay out of go.work and
// do not move the versions the other modules use:
//
//	cd tools/objectstore && GOWORK=off CGO_ENABLED=0 go build -o ../../bin/ github.com/versity/versitygw/cmd/versitygw
package objectstore
