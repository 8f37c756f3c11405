# sluice/metadata: the static sluice-metadata binary (CGO_ENABLED=0) on an empty image.
# Build with `make images`, which compiles the binary into bin/docker first.
FROM scratch
COPY bin/docker/sluice-metadata /sluice-metadata
ENV SLUICE_ADMIN_ADDR=0.0.0.0:7072 SLUICE_HTTP_ADDR=0.0.0.0:7070 SLUICE_RAFT_ADDR=0.0.0.0:7071 SLUICE_DATA_DIR=/data SLUICE_LOG_FORMAT=json
EXPOSE 7070 7071 7072
HEALTHCHECK --interval=2s --timeout=3s --start-period=5s --retries=3 CMD ["/sluice-metadata", "healthcheck"]
ENTRYPOINT ["/sluice-metadata"]
