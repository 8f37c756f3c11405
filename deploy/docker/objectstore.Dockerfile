# sluice/objectstore: the S3-compatible object store of tiered storage
# (versitygw, static, built from the Go module proxy by tools/objectstore) on
# an empty image. Build with `make images`, which compiles the binary into
# bin/docker first. Its data is under /data: meta (the objects' metadata) and
# data (the buckets); WORKDIR creates both, and a new volume mounted on
# /data starts with them.
FROM scratch
COPY bin/docker/versitygw /versitygw
WORKDIR /data/meta
WORKDIR /data/data
WORKDIR /
EXPOSE 9190
ENTRYPOINT ["/versitygw"]
