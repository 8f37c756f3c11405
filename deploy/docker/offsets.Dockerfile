# sluice/offsets: the static sluice-offsets binary (CGO_ENABLED=0) on an empty image.
# Build with `make images`, which compiles the binary into bin/docker first.
FROM scratch
COPY bin/docker/sluice-offsets /sluice-offsets
ENV SLUICE_ADMIN_ADDR=0.0.0.0:7082 SLUICE_HTTP_ADDR=0.0.0.0:7080 SLUICE_RAFT_ADDR=0.0.0.0:7081 SLUICE_DATA_DIR=/data SLUICE_LOG_FORMAT=json
EXPOSE 7080 7081 7082
HEALTHCHECK --interval=2s --timeout=3s --start-period=5s --retries=3 CMD ["/sluice-offsets", "healthcheck"]
ENTRYPOINT ["/sluice-offsets"]
